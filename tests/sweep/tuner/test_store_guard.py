"""The store's guard under Tune: a failure it learns from a trial's error (a full disk the trial met
first) is raised by ``StoreGuard.fit`` as its one line, not as the ``TuneError`` Tune wraps a
hook's raise in when it comes from a failed trial's hooks; a tracking server silent when the
sweep ends stops every write at once, with the exit status of the signal that ended the sweep."""

import errno
import itertools
import os
import signal

import pytest
from ray import tune

from sweep.cluster.ports import free_port
from sweep.tuner.store_guard import StoreGuard, StoreUnreachableError
from trainables.errors import DiskFullError
from trainables.launch.signals import ctrl_c_restored_after


def full_disk(config):
    raise OSError(errno.ENOSPC, "No space left on device")  # what a trial's checkpoint or MLflow write meets


def tuner(tmp_path, guard: StoreGuard) -> tune.Tuner:
    run = tune.RunConfig(
        name="guard", storage_path=str(tmp_path / "ray"), callbacks=[guard], failure_config=tune.FailureConfig(max_failures=2), verbose=0
    )
    return tune.Tuner(full_disk, run_config=run)


def test_a_full_disk_a_trial_met_ends_the_fit_in_one_line_and_is_not_retried(tmp_path, local_ray):
    guard = StoreGuard(f"sqlite:///{tmp_path}/mlflow.db", "`mjp sweep resume DIR` continues the sweep")
    with pytest.raises(DiskFullError) as raised:
        guard.fit(tuner(tmp_path, guard))
    assert str(raised.value).startswith("a disk this command writes to is full (") and "No space left on device)" in str(raised.value)
    assert str(raised.value).endswith("then `mjp sweep resume DIR` continues the sweep") and "Traceback" not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_without_the_guard_s_fit_tune_hands_the_driver_a_traceback(tmp_path, local_ray):
    """Why ``StoreGuard.fit`` exists: the same failure, raised from the hook of a failed trial, reaches
    ``tuner.fit()``'s caller as a TuneError whose message is a traceback."""
    guard = StoreGuard(f"sqlite:///{tmp_path}/mlflow.db", "`mjp sweep resume DIR` continues the sweep")
    with pytest.raises(tune.TuneError, match="Traceback") as raised:
        tuner(tmp_path, guard).fit()
    assert "DiskFullError" in str(raised.value) and isinstance(guard.failure, DiskFullError)


def test_a_tracking_server_silent_at_the_end_stops_every_write_and_a_store_file_is_not_asked(tmp_path):
    """At the experiment's end (before the recorder closes the runs) a server is asked once: one that
    does not answer is the sweep's one line, and ``holds()`` turns false, so nothing more is written."""
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    guard = StoreGuard(gone, "`mjp sweep resume DIR` continues the sweep")
    assert guard.holds()
    guard.on_experiment_end([])
    assert not guard.holds() and isinstance(guard.failure, StoreUnreachableError)
    assert str(guard.failure).startswith(f"the MLflow server {gone} did not answer as the sweep ended (")
    assert str(guard.failure).endswith("then `mjp sweep resume DIR` continues the sweep and closes them")
    assert guard.failure.exit_code == 1 and guard.failure.store_lost  # no signal came: a failure; the parent run is not written

    local = StoreGuard(f"sqlite:///{tmp_path}/mlflow.db", "run the command again")
    local.on_experiment_end([])
    assert local.holds() and local.failure is None


def ctrl_c_the_driver(config, driver: int):
    os.kill(driver, signal.SIGINT)  # as a person's Ctrl-C: Tune's handler takes it and stops the run
    for step in itertools.count():
        tune.report({"step": step})  # raises once Tune stops the trial


def test_a_server_silent_after_a_ctrl_c_ends_the_sweep_with_ctrl_c_s_status(tmp_path, local_ray):
    """Ctrl-C reaches Tune's handler, not this project's: the guard still knows a signal ended the
    sweep (``ctrl_c_restored_after``), so the command exits 130, as after any Ctrl-C, not 1."""
    gone = f"http://127.0.0.1:{free_port()}"
    guard = StoreGuard(gone, "`mjp sweep resume DIR` continues the sweep")
    trainable = tune.with_parameters(ctrl_c_the_driver, driver=os.getpid())
    run = tune.RunConfig(name="ctrl-c", storage_path=str(tmp_path / "ray"), callbacks=[guard], verbose=0)
    before = signal.getsignal(signal.SIGINT)
    with ctrl_c_restored_after(), pytest.raises(StoreUnreachableError) as raised:
        guard.fit(tune.Tuner(trainable, run_config=run))
    assert raised.value.exit_code == 130, "a Ctrl-C's status"
    assert signal.getsignal(signal.SIGINT) is before
