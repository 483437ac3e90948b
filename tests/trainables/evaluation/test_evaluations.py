"""The end-of-training robustness and PE evaluations on a tiny digits model, and ``mjp evaluate``
on a timm model with local weights, logged to MLflow."""

import json

import pytest
import torch
from mlflow.tracking import MlflowClient

from mjp import keys
from trainables.config.build import load_config
from trainables.data.datasets import load_datasets
from trainables.evaluation.suite import run_evaluations
from trainables.train.engine import build_model

CONFIG = "trainables/configs/digits_vit_tiny.yaml"
SMALL = "model.kwargs={patch_size: 2, embed_dim: 32, depth: 2, num_heads: 2}"


def linear_position_embedding(model: torch.nn.Module) -> None:
    """Patch rows of the PE = a random linear map of (row, column): a 2-D PE and nothing else."""
    h, w = model.patch_embed.grid_size
    index = torch.arange(h * w, dtype=torch.float32)
    with torch.no_grad():
        model.pos_embed[0, 1:] = torch.stack([index // w, index % w], 1) @ torch.randn(
            2, model.pos_embed.shape[-1], generator=torch.Generator().manual_seed(0)
        )


@pytest.fixture(scope="module")
def digits():
    cfg = load_config(
        CONFIG,
        [
            SMALL,
            "eval.robustness={images: 12, corruptions: [gaussian_noise, glass_blur], workers: 1}",
            "eval.pe_analysis={umap: false, attention_images: 2}",
        ],
    )
    bundle = load_datasets(cfg)
    model = build_model(cfg, bundle.shape).eval()
    linear_position_embedding(model)
    return cfg, bundle, model


def test_pe_analysis_of_a_linear_pe_finds_two_dimensions_and_exact_positions(digits):
    cfg, bundle, model = digits
    result = run_evaluations(cfg, model, bundle, torch.device("cpu"), ("pe",))["pe"]
    metrics, figures = result.metrics, result.figures
    assert metrics[keys.pe_ev_key(2)] == pytest.approx(1.0) and metrics[keys.pe_ev_key(1)] < 0.9
    assert metrics[keys.PE_MAE_1D] < 1e-3 and metrics[keys.PE_MAE_2D] < 1e-3
    assert [name for _, name in figures] == [
        "pe/explained_variance.png",
        "pe/pca_3d.png",
        "pe/cosine_similarity.png",
        "pe/cls_attention.png",
    ]
    assert result.notes == []


def test_robustness_logs_every_configured_corruption_and_says_what_is_absent(digits):
    cfg, bundle, model = digits
    result = run_evaluations(cfg, model, bundle, torch.device("cpu"), ("robustness",))["robustness"]
    metrics, notes, texts = result.metrics, {"robustness": result.notes}, result.texts
    assert [name for _, name in result.figures] == ["robustness/errors_by_severity.png"]
    errors = json.loads(texts[0][0])["errors_by_severity"]
    assert (
        texts[0][1] == "robustness/errors.json"
        and set(errors) == {"gaussian_noise", "glass_blur"}
        and all(len(v) == 5 for v in errors.values())
    )
    assert metrics[keys.robust_err_key("glass_blur")] == pytest.approx(sum(errors["glass_blur"]) / 5)
    assert metrics[keys.ROBUST_MCE_UNNORMALIZED] == pytest.approx(sum(map(sum, errors.values())) / 10)
    assert keys.ROBUST_MCE not in metrics  # digits: no AlexNet normalisation, and the notes say why
    assert any("AlexNet" in n for n in notes["robustness"]) and any("ImageNet-A/O/R: absent" in n for n in notes["robustness"])
    assert "first 12 validation images" in notes["robustness"][0]
    again = run_evaluations(cfg, model, bundle, torch.device("cpu"), ("robustness",))["robustness"].metrics
    assert again == metrics  # seeded from eval.seed


def test_a_model_without_position_embedding_gets_a_note_not_a_crash():
    cfg = load_config(CONFIG, [SMALL, "mjp.variant=B", "eval.pe_analysis={umap: false}"])
    model = build_model(cfg, load_datasets(cfg).shape)
    result = run_evaluations(cfg, model, None, torch.device("cpu"), ("pe",))["pe"]
    assert result.metrics == {} and "has no absolute position embedding" in result.notes[0]


def test_mjp_evaluate_a_timm_model_with_local_weights_logs_a_new_evaluation_run(tmp_path, capsys, monkeypatch):
    import timm

    from sweep.cli import main

    source = timm.create_model(
        "vit_tiny_patch16_224", img_size=8, in_chans=1, num_classes=10, patch_size=2, embed_dim=32, depth=2, num_heads=2
    )
    linear_position_embedding(source)
    torch.save(source.state_dict(), tmp_path / "weights.pth")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    argv = [
        "evaluate",
        "--timm",
        "vit_tiny_patch16_224",
        "--pretrained-file",
        str(tmp_path / "weights.pth"),
        "--config",
        CONFIG,
        "--set",
        SMALL,
        "--set",
        "eval.pe_analysis={umap: false, attention_images: 0}",
        "--what",
        "pe,shuffle",
        "--uri",
        uri,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| pe/ev_2 | 100.0% |" in out and "logged into MLflow run" in out
    client = MlflowClient(uri)
    run = client.search_runs([e.experiment_id for e in client.search_experiments()], filter_string="tags.`mjp.kind` = 'evaluation'")[0]
    assert run.data.metrics[keys.PE_MAE_2D] < 1e-3  # the file's PE, not timm's random init
    assert keys.VAL_CONSISTENCY in run.data.metrics and run.data.tags["mjp.source"].startswith("timm:vit_tiny_patch16_224 weights")
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "figures/pe")}
    assert "figures/pe/explained_variance.png" in logged


def test_the_registry_names_every_evaluation_once_with_what_it_reports(digits):
    """An evaluation is one registry entry: mjp evaluate's --what, the section a config sets, its
    default and the metrics a study may optimise all come from it."""
    from trainables.evaluation.registry import EVALUATIONS, reported_metrics
    from trainables.evaluation.suite import with_sections

    cfg, _, _ = digits
    assert list(EVALUATIONS) == ["shuffle", "robustness", "pe", "privacy"]
    assert cfg.eval.privacy is None and not any(k.startswith("privacy/") for k in reported_metrics(cfg))
    full = with_sections(cfg, ("privacy",))
    assert full.eval.privacy is not None and keys.privacy_key("c", "psnr") in reported_metrics(full)
    assert {keys.VAL_CONSISTENCY, keys.top1_shuffled_key(0.9), keys.VAL_TOP1} <= reported_metrics(cfg)
