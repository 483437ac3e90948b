"""Every shipped study launches at smoke size: its scheduler and its sampled trials are valid,
checked when it is loaded; a sweep that fails before its first trial leaves no directory; and
every smoke study learns: its table is well above chance."""

import os
from pathlib import Path

import pytest
import torch
import yaml
from ray.tune.schedulers import ASHAScheduler

from sweep.study.load import load_study
from sweep.study.names import STUDIES_DIR
from sweep.study.space import sampled_params
from sweep.tuner.run import run_sweep
from sweep.tuner.tuner import asha_rungs, make_scheduler, objectives_checked_at_the_end
from tests.in_process_session import InProcessSession
from trainables.config.worker import WorkerInput
from trainables.errors import ConfigError
from trainables.tracking import schema
from trainables.tracking.store import TrackingError

SHIPPED = sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_study_builds_its_scheduler_and_trials_at_smoke_size(name, fake_fashion):
    study = load_study(name, smoke=True, overrides={"data.root": str(fake_fashion)} if name == "fashion" else {})
    epochs = study.base.optim.epochs
    scheduler = make_scheduler(study)  # Ray asserts grace_period <= max_t here
    if isinstance(scheduler, ASHAScheduler):
        assert scheduler._max_t == epochs and 1 <= study.config.scheduler.grace_period <= epochs
        assert asha_rungs(study) and max(asha_rungs(study)) < epochs  # ASHA decides at least once
    samples = sampled_params(study.config, min(study.num_trials, 8))
    assert len(samples) == min(study.num_trials, 8)
    for params in samples:
        assert study.recipe.config(params).optim.epochs == epochs


def test_tune_smoke_has_its_own_grace_period():
    assert load_study("tune", check=False).config.scheduler.grace_period == 10
    assert load_study("tune", smoke=True, check=False).config.scheduler.grace_period == 8


def test_a_final_metric_among_several_objectives_is_checked_at_the_end_only(monkeypatch):
    """pareto's val/consistency comes with the last epoch only: Tune's per-epoch check (which
    stopped every pareto sweep longer than one epoch after its first epoch) is off while it runs."""
    monkeypatch.delenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", raising=False)
    with objectives_checked_at_the_end(load_study("pareto", smoke=True, check=False)):
        assert os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] == "1"
    assert "TUNE_DISABLE_STRICT_METRIC_CHECKING" not in os.environ
    with objectives_checked_at_the_end(load_study("quickstart", smoke=True, check=False)):
        assert "TUNE_DISABLE_STRICT_METRIC_CHECKING" not in os.environ


def _asha_study(tmp_path, **smoke):
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "base": "trainables/configs/digits_vit_tiny.yaml",
                "objective": {"metric": "val/top1"},
                "space": {"mjp.mask_ratio": {"type": "uniform", "low": 0.1, "high": 0.3}},
                "budget": {"trials": 2},
                "train": {"optim": {"epochs": 20}},
                "scheduler": {"type": "asha", "grace_period": 10},
                "smoke": {"train": {"optim": {"epochs": 3}}, **smoke},
            }
        )
    )
    return str(path)


def test_a_grace_period_past_the_smoke_epochs_fails_at_load_naming_both(tmp_path):
    path = _asha_study(tmp_path)
    load_study(path)  # full size: 10 <= 20
    with pytest.raises(
        ConfigError, match=r"scheduler.grace_period=10 is more than the 3 epochs each trial trains at smoke size .*smoke: \{scheduler:"
    ):
        load_study(path, smoke=True)
    assert load_study(_asha_study(tmp_path, scheduler={"type": "asha", "grace_period": 1}), smoke=True).config.scheduler.grace_period == 1


def test_a_sweep_failing_before_its_first_trial_leaves_no_directory(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.delete_experiment(client.create_experiment("mjp-quickstart-smoke"))
    storage = tmp_path / "ray_results"
    with pytest.raises(TrackingError, match="'mjp-quickstart-smoke' .* is deleted"):
        run_sweep(load_study("quickstart", smoke=True), storage=str(storage), uri=uri)
    assert not storage.exists() or list(storage.iterdir()) == []


@pytest.mark.parametrize("name", SHIPPED)
def test_a_smoke_study_is_recorded_apart_from_the_full_one(name):
    """Name (report folder, results file, status) and MLflow experiment both end in -smoke."""
    full, smoke = load_study(name, check=False), load_study(name, smoke=True, check=False)
    assert smoke.name == f"{full.name}-smoke"
    full_experiment = full.base.tracking.experiment
    assert smoke.base.tracking.experiment == f"{full_experiment}-smoke"
    given = load_study(name, smoke=True, check=False, overrides={"tracking.experiment": "mine"})
    assert given.base.tracking.experiment == "mine-smoke"


def test_a_smoke_size_may_not_name_its_own_experiment(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "base": "trainables/configs/digits_vit_tiny.yaml",
                "objective": {"metric": "val/top1"},
                "space": {"mjp.variant": {"type": "grid", "values": ["A"]}},
                "search": {"algorithm": "grid"},
                "train": {"tracking": {"experiment": "full"}},
                "smoke": {"train": {"tracking": {"experiment": "full"}}},
            }
        )
    )
    load_study(str(path), check=False)
    with pytest.raises(ConfigError, match=r"smoke.train.tracking.experiment is not needed"):
        load_study(str(path), smoke=True, check=False)


def test_analyze_results_never_writes_a_smoke_sweep(tmp_path, capsys):
    from sweep.cli import main
    from sweep.commands.results import RESULTS
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(
        uri,
        "mjp-quickstart-smoke",
        run_name="quickstart-smoke-20260101-000000",
        tags={schema.TAG_KIND: "sweep", schema.TAG_STUDY: "quickstart-smoke", schema.TAG_SMOKE: "True"},
    )
    parent.set_status("FINISHED")
    before = sorted(p.name for p in RESULTS.glob("*.json"))
    assert main(["analyze", "results", "--study", "quickstart", "--uri", uri]) == 2
    assert "no sweep of study 'quickstart'" in capsys.readouterr().err
    assert main(["analyze", "results", "--study", "quickstart-smoke", "--uri", uri]) == 2
    assert "is a smoke run: results files hold full studies" in capsys.readouterr().err
    assert sorted(p.name for p in RESULTS.glob("*.json")) == before


@pytest.mark.slow
def test_the_quickstart_smoke_run_learns_and_leaves_the_full_study_alone(tmp_path, monkeypatch, local_ray, capsys):
    """`mjp sweep run quickstart --smoke` as a user runs it: every trial well above chance (10%)
    on digits, and nothing of the full study written: not its experiment, report or results."""
    import hashlib

    from mlflow.tracking import MlflowClient

    from analysis.runs import load_runs, load_sweeps
    from mjp import keys
    from sweep.cli import main
    from sweep.commands.results import RESULTS

    def results_digest():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in RESULTS.glob("*.json")}

    before = results_digest()
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["sweep", "run", "quickstart", "--smoke", "--storage", str(tmp_path / "ray")]) == 0
    capsys.readouterr()
    assert load_sweeps(uri, "quickstart").empty
    sweeps = load_sweeps(uri, "quickstart-smoke")
    assert len(sweeps) == 1
    assert {e.name for e in MlflowClient(uri).search_experiments()} == {"Default", "mjp-quickstart-smoke"}
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["quickstart-smoke"]
    runs = load_runs(uri, parent_run_id=sweeps.run_id.iloc[0])
    assert len(runs) == 4 and (runs["status"] == "FINISHED").all()
    top1 = runs[keys.VAL_TOP1]
    assert (top1 >= 0.5).all(), f"a smoke trial at chance: {sorted(top1)}"
    assert main(["analyze", "results", "--study", "quickstart", "--uri", uri]) == 2
    assert results_digest() == before


def test_a_sweep_failing_after_its_parent_run_exists_closes_it_and_says_run_again(tmp_path, monkeypatch):
    """A disk that fills while the sweep writes its state: the parent run ends FAILED (never
    RUNNING), the directory goes, and the message says to run the command again (no resume of a
    directory that no longer exists)."""
    import errno

    from mlflow.tracking import MlflowClient

    import sweep.tuner.run
    from trainables.errors import DiskFullError

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sweep.tuner.run, "write_state", full)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    storage = tmp_path / "ray_results"
    with pytest.raises(DiskFullError, match="then run the command again$"):
        run_sweep(load_study("quickstart", smoke=True), storage=str(storage), uri=uri)
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("mjp-quickstart-smoke").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
    assert not storage.exists() or list(storage.iterdir()) == []


#: Smoke studies that train quickstart's smoke recipe (model, batch, data, schedule; only their MJP
#: rows differ): the quickstart sweep test above shows that recipe learning in every row.
QUICKSTART_RECIPE = ["mask_ratio", "pareto", "robustness", "tune", "variants"]


def _recipe(name):
    cfg = load_study(name, smoke=True, check=False).base
    return cfg.data.name, cfg.data.batch_size, cfg.data.train_limit, cfg.model.name, cfg.model.kwargs, cfg.optim


@pytest.mark.parametrize("name", QUICKSTART_RECIPE)
def test_these_smoke_studies_train_quickstarts_recipe(name):
    assert _recipe(name) == _recipe("quickstart"), f"{name}'s smoke recipe left quickstart's: add its trials to SMOKE_TRIALS"


#: The smoke trials that train otherwise (another model, data, rate, a row of its own, an early stop)
#: and the top-1 each must reach (chance: 10%).
SMOKE_TRIALS = [
    ("variants", {"mjp.variant": "C"}, 0.18),  # reference SPP: ~26%, at most ~54% on digits (variants.yaml)
    ("backbones", {"backbone": "swin_t_mjp"}, 0.5),
    ("tune", {"mjp.mask_ratio": 0.5, "mjp.dal": "linear", "mjp.dal_weight": 0.1}, 0.5),  # also at ASHA's rung
    ("fashion", {"mjp.variant": "J"}, 0.5),
    ("privacy", {"mjp.variant": "J"}, 0.5),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, params, least", SMOKE_TRIALS, ids=[f"{n}-{next(iter(p.values()))}" for n, p, _ in SMOKE_TRIALS])
def test_the_smoke_trials_of_their_own_learn(name, params, least):
    """The loop a smoke trial runs (``train_loop``, in this process instead of a Tune trial's), on
    that trial's config: its row of the smoke table is not at chance. Where ASHA may stop a trial,
    top-1 is checked at that epoch too."""
    from mjp import keys
    from trainables.data.idx import FASHION_MNIST_DEFAULT
    from trainables.train.loop import train_loop

    if name == "fashion" and not Path(FASHION_MNIST_DEFAULT).is_dir():
        pytest.skip(f"no Fashion-MNIST at {FASHION_MNIST_DEFAULT} (Debian's dataset-fashion-mnist)")
    no_extras = {"eval.robustness": None, "eval.pe_analysis": None, "eval.privacy": None}  # top-1 only
    study = load_study(name, smoke=True, overrides=no_extras)
    session, threads = InProcessSession(), torch.get_num_threads()
    torch.set_num_threads(1)  # as in a trial: Ray gives a 1-CPU trial OMP_NUM_THREADS=1
    try:
        train_loop(WorkerInput(study.recipe.config(params)), session)
    finally:
        torch.set_num_threads(threads)
    top1 = [r[keys.VAL_TOP1] for r in session.reports]
    assert len(top1) == study.recipe.config(params).optim.epochs
    for epoch in [*asha_rungs(study), len(top1)]:
        assert top1[epoch - 1] >= least, f"{name} --smoke {params} at chance: top-1 {top1[epoch - 1]:.1%} after epoch {epoch} (all: {top1})"
