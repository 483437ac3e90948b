"""An evaluation is its module plus one registry entry: a toy evaluation, registered by putting one
``Evaluation`` into ``EVALUATIONS`` (nothing else), runs at the end of a training, is offered and
described by ``mjp evaluate --what`` and checked by the pre-flight; reading the registry imports no
torch."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, Subset

from trainables.config.build import load_config
from trainables.data.datasets import load_datasets
from trainables.errors import ConfigError
from trainables.evaluation.registry import EVALUATIONS, Evaluation, Lazy, at_end
from trainables.evaluation.result import EvaluationResult, PreflightFacts
from trainables.tracking import schema

ROOT = Path(__file__).resolve().parents[3]
CONFIG = "trainables/configs/digits_vit_tiny.yaml"
SMALL = "model.kwargs={patch_size: 2, embed_dim: 32, depth: 2, num_heads: 2}"
DESCRIPTION = "a toy: one metric, one text, one note"


class Toy:
    """The toy evaluation's two functions, recording their calls; ``refusal``: what its check raises."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.checked: list[PreflightFacts] = []
        self.refusal: str | None = None

    def run(self, cfg, model, bundle, device, title) -> EvaluationResult:
        self.runs.append(title)
        return EvaluationResult({"toy/score": 0.25}, texts=[("toy\n", "toy/toy.txt")], notes=["made by a toy"])

    def check(self, cfg, facts: PreflightFacts) -> None:
        self.checked.append(facts)
        if self.refusal:
            raise ConfigError(self.refusal)


class Tracker:
    """What ``final_evaluation`` logs, kept (a ``RunTracker`` without MLflow)."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self.files: list[str] = []

    def set_tags(self, tags: dict[str, str]) -> None:
        self.tags.update(tags)

    def log_text(self, text: str, file: str) -> None:
        self.files.append(file)

    def log_figure(self, figure, file: str) -> None:
        self.files.append(file)

    def log_artifact(self, path, folder: str) -> None:
        self.files.append(f"{folder}/{Path(path).name}")


@pytest.fixture
def toy(monkeypatch) -> Toy:
    made = Toy()
    monkeypatch.setitem(EVALUATIONS, "toy", Evaluation("toy", DESCRIPTION, made.run, check=made.check))
    return made


@pytest.fixture(scope="module")
def digits():
    cfg = load_config(CONFIG, [SMALL])
    bundle = load_datasets(cfg)
    from trainables.train.engine import build_model

    return cfg, bundle, build_model(cfg, bundle.shape).eval()


def test_the_end_of_a_training_runs_a_registered_evaluation_on_rank_0_and_logs_it(toy, digits):
    from trainables.evaluation.final import final_evaluation

    cfg, bundle, model = digits
    assert at_end() == ("robustness", "pe", "privacy", "toy")  # shuffle runs on every worker instead
    loader = DataLoader(Subset(bundle.val, range(16)), batch_size=8)
    tracker = Tracker()
    metrics = final_evaluation(cfg, model, bundle, loader, SimpleNamespace(device=torch.device("cpu"), rank=0), tracker, lambda t: t)
    assert toy.runs == [f"{cfg.model.name} / {cfg.variant}"]  # robustness, pe and privacy are not configured: only the toy ran
    assert metrics["toy/score"] == 0.25 and "val/consistency" in metrics
    assert tracker.tags == {schema.notes_tag("toy"): "made by a toy"} and "toy/toy.txt" in tracker.files
    assert final_evaluation(cfg, model, bundle, loader, SimpleNamespace(device=torch.device("cpu"), rank=1), None, lambda t: t)
    assert len(toy.runs) == 1  # not on the other workers


def test_mjp_evaluate_offers_describes_and_runs_a_registered_evaluation(toy, digits, capsys):
    from sweep.cli import build_parser
    from sweep.commands.evaluate import evaluate_model, parse_what
    from trainables.evaluation.suite import with_sections

    assert parse_what("pe,toy") == ("pe", "toy")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["evaluate", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert f"toy - {DESCRIPTION}" in shown and "shuffle - " in shown and "privacy - " in shown
    cfg, _, model = digits
    assert with_sections(cfg, ("toy",)) is cfg  # no section to fill in
    results = evaluate_model(cfg, model, ("toy",))
    assert list(results) == ["toy"] and results["toy"].metrics == {"toy/score": 0.25}
    assert "  toy ..." in capsys.readouterr().out


def test_the_preflight_gives_a_registered_evaluation_its_check(toy):
    from trainables.launch.preflight import preflight

    cfg = load_config(CONFIG)
    preflight(cfg)
    facts = toy.checked[-1]
    assert facts.files and facts.info.shape.img_size == 8 and facts.patches == 16 and facts.model is not None
    preflight(cfg, files=False)  # mjp sweep plan: no files read
    assert not toy.checked[-1].files
    toy.refusal = "toy.level=3: allowed is at most 2"
    with pytest.raises(ConfigError, match="toy.level=3: allowed is at most 2"):
        preflight(cfg)


def test_every_shipped_entry_names_functions_that_exist():
    lazy = [f for e in EVALUATIONS.values() for f in (e.run, e.check) if isinstance(f, Lazy)]
    assert len(lazy) == 7 and all(callable(f.resolve()) for f in lazy)
    with pytest.raises(ValueError, match="section and field go together"):
        Evaluation("toy", DESCRIPTION, Toy().run, field="toy")


def test_reading_the_registry_and_the_evaluate_help_imports_no_torch():
    code = (
        "import sys\n"
        "from sweep.cli import main\n"
        "from trainables.config.schema import TrainConfig\n"
        "from trainables.evaluation.registry import reported_metrics\n"
        "reported_metrics(TrainConfig())\n"
        "try: main(['evaluate', '--help'])\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in ('torch', 'timm', 'matplotlib', 'trainables.evaluation.robustness') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "privacy - " in " ".join(out.stdout.split()) and out.stdout.strip().splitlines()[-1] == "[]"
