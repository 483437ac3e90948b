"""Long runs tell how they are doing: the engine's in-epoch progress and data-wait share, the
progress tag on the MLflow run, the console's progress line and ETA, MLflow system metrics."""

import io

import pytest
import torch
from mlflow.tracking import MlflowClient
from ray.tune.callback import CallbackList
from ray.tune.experiment import Trial

from mjp import keys
from sweep.console.view import ConsoleView
from trainables.config.build import build_config
from trainables.launch.trial import start_run
from trainables.tracking import schema
from trainables.tracking.epochs import EpochLogger
from trainables.tracking.progress import PERF_DATA_WAIT_FRAC, Progress, pace
from trainables.tracking.runs import MlflowProgress, RunTracker
from trainables.train.engine import build_model, build_state, seed_everything, train_one_epoch

TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2}},
    "optim": {"epochs": 3},
    "runtime": {"log_every": 1},
    "tracking": {"experiment": "progress"},
}


class Clock:
    """A stand-in for the engine's ``time`` module: seconds pass only when the test says so."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class TimedLoader:
    """Batches of 8 digits-shaped images; fetching one takes ``fetch_s`` on ``clock``."""

    def __init__(self, clock, batches, fetch_s):
        self.clock, self.batches, self.fetch_s = clock, batches, fetch_s

    def __iter__(self):
        gen = torch.Generator().manual_seed(0)
        for _ in range(self.batches):
            self.clock.now += self.fetch_s
            yield torch.randn(8, 1, 8, 8, generator=gen), torch.randint(0, 10, (8,), generator=gen)

    def __len__(self):
        return self.batches


def _state(cfg, batches):
    from trainables.data.info import DataShape

    seed_everything(0)
    model = build_model(cfg, DataShape(num_classes=10, in_chans=1, img_size=8))
    return build_state(cfg, model, batches, 1)


def test_an_epoch_reports_its_progress_and_the_share_of_time_spent_waiting_for_data(monkeypatch):
    clock = Clock()
    monkeypatch.setattr("trainables.train.engine.time", clock)
    cfg = build_config(TINY)
    state = _state(cfg, 4)
    reports = []

    def on_log(metrics, step):  # logging takes 0.75 s here, the loader 0.25 s per batch, training no time
        reports.append((dict(metrics), step))
        clock.now += 0.75

    out = train_one_epoch(cfg, state, TimedLoader(clock, 4, 0.25), torch.device("cpu"), on_log=on_log)
    assert out[PERF_DATA_WAIT_FRAC] == pytest.approx(0.25) and out[keys.PERF_IMG_PER_S] == pytest.approx(32 / 4.0)
    progress = [Progress.from_report(m) for m, _ in reports]
    assert [(p.epoch, p.step, p.steps) for p in progress] == [(1, s, 4) for s in (1, 2, 3, 4)]
    assert progress[1].elapsed_s == pytest.approx(0.25 + 0.75 + 0.25) and progress[1].data_wait_frac == pytest.approx(0.5 / 1.25)
    assert progress[1].img_per_s == pytest.approx(16 / 1.25) and progress[1].epoch_eta_s == pytest.approx(1.25)


def test_the_console_shows_a_running_trial_s_progress_from_its_mlflow_run(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = build_config(TINY, {"tracking.system_metrics_s": None})
    parent = RunTracker.create(uri, "progress", run_name="sweep")
    run = start_run(cfg, uri, run_name="A-baseline-s0", tags={schema.TAG_TRIAL_ID: "t1"}, parent_run_id=parent.run_id)
    assert MlflowProgress(uri, "progress", parent.run_id)("t1") is None  # no report yet
    EpochLogger(run).running({keys.TRAIN_LOSS: 2.0, keys.TRAIN_LOSS_DAL: 0.0, **pace(2, 30, 120, 30 * 64, 6.0, 20.0)}, 150)
    by_trial, by_run = MlflowProgress(uri, "progress", parent.run_id)("t1"), MlflowProgress(uri, "progress", run_id=run.run_id)("t1")
    assert by_trial == by_run and (by_trial.epoch, by_trial.step, by_trial.steps, by_trial.img_per_s) == (2, 30, 120, 96.0)
    assert MlflowClient(run.uri).get_metric_history(run.run_id, "train/loss_running")[0].step == 150
    out = io.StringIO()
    view = ConsoleView(
        "sweep s",
        lambda p: "A baseline seed 0",
        lambda p: 3,
        [(keys.VAL_TOP1, "max")],
        2,
        stream=out,
        progress_of=MlflowProgress(uri, "progress", run_id=run.run_id),
        poll_s=0,
        plain_progress_s=0,
    )
    trial = Trial("fake", config={}, trial_id="t1", stub=True)
    view.on_trial_start(0, [trial], trial)
    view.on_trial_result(0, [trial], trial, {"epoch": 1, keys.VAL_TOP1: 0.5})
    tune_calls = CallbackList([view])  # as Tune calls its callbacks: by the hooks' names (a method Tune never calls showed nothing)
    tune_calls.on_step_end(iteration=1, trials=[trial])
    line = out.getvalue().splitlines()[-1]
    assert line.endswith("progress  A baseline seed 0: epoch 2/3 step 30/120 · 96 img/s · data wait 30% · epoch ETA 1:00")
    row = view.rows["t1"]
    assert row.epochs_done == pytest.approx(1.25)
    from rich.console import Console

    table = Console(file=io.StringIO(), width=250)
    table.print(view.table.rich())
    assert "step 30/120" in table.file.getvalue() and "this epoch" in table.file.getvalue()
    for width in (200, 80):  # what a terminal of that width shows while the trial is mid-epoch
        shown = Console(file=io.StringIO(), width=width)
        shown.print(view.table.rich(width))
        lines = shown.file.getvalue().splitlines()
        assert max(map(len, lines)) <= width and any("A baseline seed 0" in line for line in lines), lines
        assert ("step 30/120" in shown.file.getvalue()) == (width == 200), (width, lines)  # at 80 the in-epoch column goes first
    view.on_trial_result(0, [trial], trial, {"epoch": 2, keys.VAL_TOP1: 0.6})
    assert row.progress is None and row.epochs_done == 2  # the reported epoch ended: its progress is gone
    tune_calls.on_step_end(iteration=2, trials=[trial])
    assert row.progress is None  # the tag still says epoch 2: stale, not shown again
    assert "this epoch" not in view.table.plain()


def test_system_metrics_are_logged_on_a_training_run_unless_switched_off(tmp_path):
    import ray  # noqa: F401 - Ray brings psutil (its vendored copy)

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    off = start_run(build_config(TINY, {"tracking.system_metrics_s": None}), uri, run_name="off")
    assert EpochLogger(off).system_metrics is None
    on = start_run(build_config(TINY, {"tracking.system_metrics_s": 3600}), uri, run_name="on")
    logger = EpochLogger(on)
    monitor = logger.system_metrics
    assert monitor.sampling_interval == 3600 and monitor._process.is_alive()
    logger.final({keys.VAL_CONSISTENCY: 0.5})  # the end of training stops it, with one last sample (no interval passed)
    assert logger.system_metrics is None and monitor._process is None
    logged = on.run().data.metrics
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= logged.keys()


def test_short_epochs_report_their_progress_several_times_without_the_running_loss(monkeypatch, tmp_path):
    from trainables.tracking.progress import progress_every

    assert progress_every(22, 50) == 6 and progress_every(2502, 50) == 50 and progress_every(3, 50) == 1  # the demo, ImageNet, tiny
    clock = Clock()
    monkeypatch.setattr("trainables.train.engine.time", clock)
    cfg = build_config(TINY, {"runtime.log_every": 50, "tracking.system_metrics_s": None})
    state = _state(cfg, 8)
    reports = []
    train_one_epoch(cfg, state, TimedLoader(clock, 8, 0.25), torch.device("cpu"), on_log=lambda m, step: reports.append((dict(m), step)))
    assert [Progress.from_report(m).step for m, _ in reports] == [2, 4, 6, 8]  # log_every 50 > 8 steps: the old code said nothing
    assert not any(k.startswith("train/loss") for m, _ in reports for k in m)  # no host sync for the loss in between
    run = start_run(cfg, f"sqlite:///{tmp_path}/mlflow.db", run_name="short")
    logger = EpochLogger(run)
    for metrics, step in reports:
        logger.running(metrics, step)
    assert Progress.from_tag(run.tags()[schema.TAG_PROGRESS]).step == 8
    assert MlflowClient(run.uri).get_metric_history(run.run_id, "train/loss_running") == []


def test_the_console_reads_progress_a_quarter_epoch_apart_when_epochs_are_short():
    import time

    from sweep.console.view import MIN_POLL_S

    view = ConsoleView(
        "sweep s", lambda p: "A", lambda p: 30, [(keys.VAL_TOP1, "max")], 1, stream=io.StringIO(), progress_of=lambda t: None, poll_s=5
    )
    trial = Trial("fake", config={}, trial_id="t1", stub=True)
    view.on_trial_start(0, [trial], trial)
    assert view.poll_interval() == 5  # no epoch yet
    row = view.rows["t1"]
    row.started, row.epoch = time.monotonic() - 40, 10  # 4-s epochs: read every second
    assert view.poll_interval() == pytest.approx(1.0, abs=0.01)
    row.epoch = 400  # 0.1-s epochs: no faster than MIN_POLL_S
    assert view.poll_interval() == MIN_POLL_S
    row.started, row.epoch = time.monotonic() - 400, 10  # 40-s epochs: the usual poll_s
    assert view.poll_interval() == 5


def test_a_progress_read_from_a_server_that_stopped_answering_is_none_tried_once():
    """The live view reads progress from the driver's loop: a server that stopped answering gives no
    progress at once, not MLflow's retries for minutes (during which Ctrl-C and SIGTERM wait)."""
    from concurrent.futures import ThreadPoolExecutor

    from sweep.cluster.ports import free_port

    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    pool = ThreadPoolExecutor(1)  # the bound only turns a read stuck in retries into a failure
    try:
        assert pool.submit(MlflowProgress(gone, "progress", "some-parent"), "t1").result(timeout=60) is None
        assert pool.submit(MlflowProgress(gone, "progress", run_id="some-run"), "t1").result(timeout=60) is None
    finally:
        pool.shutdown(wait=False)
