"""Study files: validation before launch, the define-by-run space, presets and seeds."""

import numpy as np
import optuna
import pytest
import yaml
from PIL import Image

from sweep.study.load import load_study, resolve_study_path
from sweep.study.names import STUDIES_DIR
from sweep.study.space import define_by_run, make_sampler
from trainables.errors import ConfigError

SHIPPED = sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))
BASE = {"base": "trainables/configs/digits_vit_tiny.yaml", "objective": {"metric": "val/top1"}, "budget": {"trials": 1}}


def write(tmp_path, **study):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"name": "t", **BASE, **study}))
    return str(path)


@pytest.fixture(scope="module")
def fake_imagenet(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet")
    for split in ("train", "val"):
        for c in ("n01", "n02"):
            (root / split / c).mkdir(parents=True)
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / split / c / "0.png")
            for i in range(1, 600):  # enough for a batch of 128 x 8 workers (hard links: no copies)
                (root / split / c / f"{i}.png").hardlink_to(root / split / c / "0.png")
    return root


def test_every_shipped_study_validates_at_smoke_size(fake_fashion):
    assert set(SHIPPED) == {"quickstart", "mask_ratio", "variants", "backbones", "tune", "pareto", "fashion", "privacy", "robustness"}
    for name in SHIPPED:  # fashion reads IDX files: fake ones, the machine may not have Debian's
        overrides = {"data.root": str(fake_fashion)} if name == "fashion" else {}
        assert load_study(name, smoke=True, overrides=overrides).num_trials >= 2


def test_every_shipped_study_validates_at_full_size(fake_imagenet, fake_fashion):
    roots = {"fashion": {"data.root": str(fake_fashion)}, "quickstart": {}, "privacy": {}}  # digits reads no directory
    sizes = {name: load_study(name, overrides=roots.get(name, {"data.root": str(fake_imagenet)})).num_trials for name in SHIPPED}
    assert sizes["mask_ratio"] == 18 and sizes["variants"] == 30 and sizes["backbones"] == 6


def test_full_size_without_imagenet_fails_naming_the_path():
    with pytest.raises(ValueError, match="data.root='/data/imagenet' does not exist"):
        load_study("mask_ratio")


@pytest.mark.parametrize(
    "study, message",
    [
        (
            dict(space={"mjp.mask_ratio": {"type": "choice", "values": []}}),
            "space.mjp.mask_ratio.choice.values: List should have at least 1 item",
        ),
        (dict(space={"optim.base_lr": {"type": "loguniform", "low": 0.1, "high": 0.01}}), "low=0.1 > high=0.01"),
        (dict(space={"optim.lr": {"type": "choice", "values": [1]}}), "space.optim.lr is not a TrainConfig key"),
        (dict(objective={"metric": "val/top3"}), "objective metric 'val/top3' is not reported by the trainable"),
        (dict(budget={"trials": 2, "max_concurent": 2}), "budget.max_concurent: not a key of this section"),
        (
            dict(budget={"num_samples": 4}),
            "budget.num_samples: not a key of this section (got 4) (budget has: max_concurrent, time_budget_s, trials)",
        ),
        (dict(space={"mjp.mask_ratio": {"type": "grid", "values": [0, 0.27]}}), "needs search.algorithm: grid"),
        (
            dict(space={"mjp.dal_weight": {"type": "uniform", "low": 0, "high": 1, "when": {"mjp.dal": ["mlp"]}}}),
            "must be a space entry listed before it",
        ),
        (dict(objective=[{"metric": "val/top1"}, {"metric": "val/consistency"}]), "2 objectives need search.algorithm 'nsga2' or 'random'"),
        (
            dict(space={"mjp.mask_ratio": {"type": "choice", "values": [0.0, 0.07]}}),
            "mjp.mask_ratio=0.07 selects round(16 x 0.07) = 1 of the 16 patches",
        ),
        (dict(space={"mjp.dal": {"type": "choice", "values": ["none", "svm"]}}), "mjp.dal"),
        (
            dict(space={"b": {"type": "choice", "values": ["x", "y"], "presets": {"x": {"mjp.dal": "pca"}}}}),
            "values ['y'] have no entry in presets",
        ),
        (dict(seeds=[0, 1]), "seeds repeat grid points"),
    ],
)
def test_bad_study_files_fail_before_launch_naming_the_key(tmp_path, study, message):
    with pytest.raises(ConfigError, match=None) as err:
        load_study(write(tmp_path, **study))
    assert message in str(err.value)


def test_unknown_study_lists_the_shipped_ones():
    with pytest.raises(
        ConfigError, match="shipped: backbones, fashion, mask_ratio, pareto, privacy, quickstart, robustness, tune, variants"
    ):
        resolve_study_path("nope")


def test_conditional_space_never_samples_dal_weight_without_dal():
    study = load_study("tune", smoke=True).config
    sample = define_by_run(study)
    opt = optuna.create_study(sampler=make_sampler(study), direction="maximize")
    seen = set()
    for i in range(60):
        trial = opt.ask()
        sample(trial)
        seen.add(trial.params["mjp.dal"])
        assert ("mjp.dal_weight" in trial.params) == (trial.params["mjp.dal"] != "none")
        opt.tell(trial, float(i % 7))
    assert seen == {"none", "pca", "linear", "mlp"}


def test_grid_sampler_visits_every_point_once(fake_imagenet):
    study = load_study("mask_ratio", overrides={"data.root": str(fake_imagenet)})
    opt = optuna.create_study(sampler=make_sampler(study.config))
    points = []

    def objective(trial):
        define_by_run(study.config)(trial)
        points.append((trial.params["mjp.mask_ratio"], trial.params["runtime.seed"]))
        return 0.0

    opt.optimize(objective, n_trials=study.num_trials)
    assert sorted(points) == sorted((r, s) for r in [0.0, 0.03, 0.09, 0.15, 0.21, 0.27] for s in [0, 1, 2])


def test_presets_expand_into_their_keys():
    study = load_study("backbones", smoke=True)
    resnet = study.recipe.config({"backbone": "resnet50_mjp"})
    assert resnet.model.name == "resnet18" and resnet.variant == "jp" and resnet.mjp.patch_size == 2
    swin = study.recipe.config({"backbone": "swin_t"})
    assert swin.model.kwargs["window_size"] == 2 and swin.variant == "baseline"


def test_seeds_multiply_the_grid(fake_imagenet):
    assert load_study("variants", smoke=True).num_trials == 10
    full = load_study("variants", overrides={"data.root": str(fake_imagenet)})
    assert full.num_trials == 30 and full.config.space["runtime.seed"].values == [0, 1, 2]


def test_large_spaces_still_check_every_choice(tmp_path):
    values = [0.0, 0.25, 0.5]
    space = {f"optim.{k}": {"type": "choice", "values": [1e-4, 2e-4, 3e-4, 4e-4]} for k in ("base_lr", "min_lr", "weight_decay")}
    space["mjp.mask_ratio"] = {"type": "choice", "values": values}
    space["optim.label_smoothing"] = {"type": "choice", "values": [0.0, 0.1, 0.2, 0.3, 0.4]}
    study = load_study(write(tmp_path, space=space))
    combos = study.combinations()  # 4*4*4*3*5 = 960 > 256: a covering set
    assert len(combos) < 960 and {c["mjp.mask_ratio"] for c in combos} == set(values)
    with pytest.raises(ConfigError, match=r"mjp.mask_ratio=0.07 selects round\(16 x 0.07\) = 1 of the 16 patches"):
        load_study(write(tmp_path, space={**space, "mjp.mask_ratio": {"type": "choice", "values": values + [0.07]}}))


def test_a_study_and_data_root_given_relative_are_recorded_absolute(tmp_path, monkeypatch):
    """The sweep's state records both: `mjp sweep resume` from another directory must find them."""
    import argparse

    from sweep.study.cli_overrides import set_overrides

    monkeypatch.chdir(STUDIES_DIR.parent.parent)
    study = load_study("sweep/studies/quickstart.yaml", check=False)
    assert study.source == str(STUDIES_DIR / "quickstart.yaml")
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(set=[], data="digits-copy")
    assert set_overrides(args) == {"data.root": str(tmp_path / "digits-copy")}
    assert set_overrides(argparse.Namespace(set=["data.root=s3://bucket/imagenet"], data=None)) == {"data.root": "s3://bucket/imagenet"}


def test_a_resume_finds_the_study_its_sweep_started_and_only_that_one(tmp_path):
    """study_of_state: the study a sweep recorded, with the same digest, resumes; a study recorded under a Ray
    job's working directory that is gone is found at its place in this copy of the project; the
    description is not what a study trains; YAML mappings with number keys still digest."""
    from dataclasses import replace

    from sweep.tuner.state import SweepState, in_project, study_of_state
    from trainables.errors import UserError

    shipped = load_study("quickstart", check=False)
    state = SweepState(
        study=shipped.source,
        name="quickstart-1",
        uri="sqlite:///m.db",
        experiment="mjp-quickstart",
        parent_run_id="0" * 32,
        study_digest=shipped.digest,
    )
    assert study_of_state(state, check=False).digest == shipped.digest
    moved = replace(state, study="/gone/_ray_pkg_0123/sweep/studies/quickstart.yaml", study_in_project=in_project(shipped.source))
    assert moved.study_in_project == "sweep/studies/quickstart.yaml" and study_of_state(moved, check=False).source == shipped.source
    mine = tmp_path / "mine.yaml"
    mine.write_text((STUDIES_DIR / "quickstart.yaml").read_text())
    started = load_study(str(mine), check=False, overrides={"model.kwargs": {1: "x", "depth": 2}})
    assert in_project(str(mine)) is None
    mine.write_text(mine.read_text().replace("description: >", "description: >\n  Reworded.", 1))
    assert load_study(str(mine), check=False, overrides={"model.kwargs": {1: "x", "depth": 2}}).digest == started.digest
    mine.write_text(mine.read_text().replace("max_concurrent: 2", "max_concurrent: 1"))
    with pytest.raises(UserError, match="changed since sweep mine-1 started"):
        study_of_state(
            replace(state, study=str(mine), extra={"model.kwargs": {1: "x", "depth": 2}}, name="mine-1", study_digest=started.digest)
        )


def test_variants_trains_at_table_4s_ratio_with_c_and_f_on_the_reference_schedule(fake_imagenet):
    """The paper's Table 4 is its gamma = 0.03 run; rows C and F run as the study says the reference
    ran them (one mask per batch, 20 warm-up epochs, half the batches); the others every batch.
    At smoke size 0.03 selects no patch of a 4x4 grid: 0.27, and 2 warm-up epochs of 10."""
    full = load_study("variants", overrides={"data.root": str(fake_imagenet)})
    smoke = load_study("variants", smoke=True)
    for study, ratio, warmup in ((full, 0.03, 20), (smoke, 0.27, 2)):
        for letter in "CF":
            cfg = study.recipe.config({"mjp.variant": letter})
            assert (cfg.mjp.mask_ratio, cfg.mjp.jigsaw_prob, cfg.mjp.mask_mode, cfg.optim.jigsaw_warmup_epochs) == (
                ratio,
                0.5,
                "per_batch",
                warmup,
            )
        for letter in "EGHJ":
            cfg = study.recipe.config({"mjp.variant": letter})
            assert (cfg.mjp.mask_ratio, cfg.mjp.jigsaw_prob, cfg.optim.jigsaw_warmup_epochs) == (ratio, 1.0, 0)
        assert study.recipe.config({"mjp.variant": "H"}).mjp.dal_pca == "reference"
        assert study.recipe.config({"mjp.variant": "C"}).mjp.spp_mode == "reference"


def test_privacy_trains_and_attacks_setting_b_at_the_papers_ratio():
    cfg = load_study("privacy").recipe.config({"mjp.variant": "J"})
    assert cfg.mjp.mask_ratio == 0.27 and cfg.eval.privacy.ratio == 0.27


def test_a_choice_of_thousands_of_values_is_checked_value_by_value_with_one_model_build(tmp_path, monkeypatch):
    """A 10,000-value choice once built a meta model twice a value (~40 ms): `mjp sweep plan` did
    not answer in 10 minutes. Values that build the same model share one build; each value is
    still checked (a bad one among 2,000 is named)."""
    import trainables.train.engine as engine

    built = []
    real = engine.build_model

    def counted(cfg, shape):
        built.append(cfg.mjp.mask_ratio if cfg.mjp else None)
        return real(cfg, shape)

    monkeypatch.setattr(engine, "build_model", counted)
    ratios = [round(0.1 + i * 1e-4, 6) for i in range(2000)]
    lrs = [round(1e-3 + i * 1e-6, 9) for i in range(2000)]
    space = {"mjp.mask_ratio": {"type": "choice", "values": ratios}, "optim.base_lr": {"type": "choice", "values": lrs}}
    study = load_study(write(tmp_path, space=space, search={"algorithm": "tpe"}), files=False)
    assert study.num_trials == 1 and len(built) <= 4, f"{len(built)} model builds"
    space["mjp.mask_ratio"]["values"] = ratios + [0.07]
    with pytest.raises(ConfigError, match=r"mjp.mask_ratio=0.07 selects round\(16 x 0.07\) = 1 of the 16 patches"):
        load_study(write(tmp_path, space=space, search={"algorithm": "tpe"}), files=False)
