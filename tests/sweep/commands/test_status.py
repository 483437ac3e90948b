"""``mjp sweep status``: each trial of a sweep with its state, metrics and MLflow run id, by study
name or sweep directory, on a store written through the real tracking adapter."""

import pytest

from mjp import keys
from sweep.cli import main
from trainables.config.build import load_config
from trainables.launch.trial import start_run
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker


@pytest.fixture
def store(tmp_path):
    """One quickstart sweep: a finished, a failed and a stopped trial; its sweep directory."""
    from sweep.tuner.state import SweepState, write_state

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    sweep_dir = tmp_path / "ray_results" / "quickstart-20260101-000000"
    parent = RunTracker.create(
        uri,
        "mjp-quickstart",
        run_name=sweep_dir.name,
        tags={schema.TAG_KIND: "sweep", schema.TAG_STUDY: "quickstart", "mjp.experiment_dir": str(sweep_dir)},
    )
    parent.log_params({"objectives": "val/top1:max", "trials": 3})
    parent.set_status("FINISHED")
    write_state(
        str(sweep_dir),
        SweepState(name=sweep_dir.name, study="quickstart", uri=uri, experiment="mjp-quickstart", parent_run_id=parent.run_id),
    )
    cfg = load_config("trainables/configs/digits_vit_tiny.yaml", ["tracking.experiment=mjp-quickstart"])
    runs = {}
    for name, top1, status, tags in (
        ("A-baseline-s0", 0.964, "FINISHED", {}),
        ("J-jp_unk_dal_mlp-s0", None, "FAILED", {schema.TAG_ERROR: "CUDA out of memory"}),
        ("E-jp-s0", 0.5, "FINISHED", {schema.TAG_STOPPED: "stopped early by the scheduler"}),
    ):
        child = start_run(cfg, uri, run_name=name, tags={schema.TAG_STUDY: "quickstart", **tags}, parent_run_id=parent.run_id)
        if top1 is not None:
            child.log_metrics({keys.VAL_TOP1: top1, keys.VAL_CONSISTENCY: 0.369}, step=3)
        child.set_status(status)
        runs[name] = child.run_id
    return uri, sweep_dir, runs


def _trial_line(out: str, name: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.strip().startswith(name + " "))


@pytest.mark.parametrize("how", ["study", "directory", "sweep name"])
def test_status_lists_every_trial_with_state_metrics_and_run_id(store, capsys, monkeypatch, how):
    uri, sweep_dir, runs = store
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: each trial on one line (pytest-xdist's processes have 80)
    target = {"study": "quickstart", "directory": str(sweep_dir), "sweep name": sweep_dir.name}[how]  # the name `sweep run` printed
    args = ["sweep", "status", target, *(["--uri", uri] if how != "directory" else [])]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "quickstart-20260101-000000  [finished]" in out and "val/top1" in out and "MLflow run id" in out
    assert _trial_line(out, "A-baseline-s0") == ["A-baseline-s0", "finished", "96.4%", "36.9%", runs["A-baseline-s0"]]
    assert _trial_line(out, "E-jp-s0") == ["E-jp-s0", "stopped", "early", "50.0%", "36.9%", runs["E-jp-s0"]]
    assert _trial_line(out, "J-jp_unk_dal_mlp-s0") == ["J-jp_unk_dal_mlp-s0", "failed", "-", "-", runs["J-jp_unk_dal_mlp-s0"]]
    assert "J-jp_unk_dal_mlp-s0: CUDA out of memory" in out


def test_a_mistyped_study_gets_a_suggestion_and_exit_2(store, capsys):
    uri, _, _ = store
    assert main(["sweep", "status", "quickstrat", "--uri", uri]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: study 'quickstrat' is neither a shipped study nor one with sweeps in") and "did you mean quickstart?" in err
    )


def test_a_shipped_studys_smoke_size_is_a_study_before_its_first_sweep(store, capsys):
    """`sweep status quickstart-smoke` (docs/cluster-local.md's "follow it") before the sweep is
    recorded, or after its job failed, was refused as "neither a shipped study nor one with sweeps"."""
    from sweep.study.names import no_sweep_error

    uri, _, _ = store  # a quickstart sweep, none of its smoke size
    for study in ("quickstart-smoke", "fashion-smoke"):
        assert main(["sweep", "status", study, "--uri", uri]) == 0
        assert capsys.readouterr().out.strip() == f"no sweeps of study {study!r} recorded in {uri}"
    assert main(["sweep", "status", "quickstrat-smoke", "--uri", uri]) == 2  # not the smoke size of a shipped study
    assert "neither a shipped study" in capsys.readouterr().err
    assert str(no_sweep_error("fashion-smoke", set(), "sqlite:///m.db")).endswith("run `mjp sweep run fashion --smoke` first")


def test_a_path_that_is_not_a_sweep_directory_is_bad_input(store, tmp_path, capsys):
    assert main(["sweep", "status", str(tmp_path)]) == 2
    assert "is not a sweep directory" in capsys.readouterr().err
    assert main(["sweep", "status", str(tmp_path / "nope")]) == 2


def test_a_sweep_state_round_trips_and_an_older_one_reads_with_defaults():
    from sweep.tuner.state import LAYOUT, SweepState

    state = SweepState(name="q-1", study="/s.yaml", uri="sqlite:///m.db", experiment="e", parent_run_id="p", extra={"optim.epochs": 3})
    assert SweepState.from_json(state.to_json()) == state
    old = SweepState.from_json('{"name": "q-1", "study": "/s.yaml", "uri": "u", "experiment": "e", "parent_run_id": "p", "retired_key": 1}')
    assert (old.layout, old.study_digest, old.optuna_storage, old.extra) == (1, None, None, {})
    assert LAYOUT >= 1


def test_no_sweep_of_a_study_names_its_smoke_size_when_that_one_ran():
    from sweep.study.names import no_sweep_error

    assert str(no_sweep_error("fashion", {"fashion-smoke"}, "sqlite:///m.db")) == (
        "no sweep of study 'fashion' in sqlite:///m.db (its smoke size has: `--study fashion-smoke`); run `mjp sweep run fashion` first"
    )
    assert "smoke" not in str(no_sweep_error("fashion", {"quickstart"}, "sqlite:///m.db"))


def test_a_sweep_whose_server_moved_is_shown_with_the_resume_that_reaches_it(store, tmp_path, capsys):
    """The recorded server is gone: status names ``--uri`` in one line; read at the new address,
    its resume command carries ``--uri`` (a plain resume would follow the dead address)."""
    import socket

    from sweep.tuner.state import SweepState, read_state, write_state

    uri, sweep_dir, _ = store
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{s.getsockname()[1]}"
    state = read_state(str(sweep_dir))
    write_state(str(sweep_dir), SweepState(**{**state.__dict__, "uri": gone}))
    assert main(["sweep", "status", str(sweep_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no MLflow server answers at {gone}" in err and f"`mjp sweep resume {sweep_dir} --uri NEW_URI`" in err
    RunTracker(uri, read_state(str(sweep_dir)).parent_run_id).set_status("KILLED")  # an interrupted sweep: status recommends its resume
    assert main(["sweep", "status", str(sweep_dir), "--uri", uri]) == 0
    assert f"resume: mjp sweep resume {sweep_dir} --uri {uri}" in capsys.readouterr().out
    assert main(["sweep", "status", "quickstart", "--uri", uri]) == 0
    assert f"resume: mjp sweep resume {sweep_dir} --uri {uri}" in capsys.readouterr().out


def test_at_80_columns_no_line_is_wider_and_every_run_id_is_whole(store, capsys, monkeypatch):
    uri, _, runs = store
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["sweep", "status", "quickstart", "--uri", uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["sweeps (newest first) in", f"  {uri}"]  # a store's path on a line of its own
    assert max(len(line) for line in lines[2:] if "CUDA out of memory" not in line) <= 80
    for run_id in runs.values():
        assert f"      MLflow run id {run_id}" in lines


def test_a_recorded_server_that_answers_is_not_a_move(store, capsys):
    """The same store through a tunnel (localhost here, the head's address in the state): the
    recorded server answers, so the plain resume is the right one (with ``--uri`` it would point
    the head at the user's tunnel)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from sweep.commands.status import resume_command
    from sweep.tuner.state import SweepState, read_state, write_state

    class Healthy(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    uri, sweep_dir, _ = store
    server = HTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        state = read_state(str(sweep_dir))
        write_state(str(sweep_dir), SweepState(**{**state.__dict__, "uri": f"http://127.0.0.1:{server.server_port}"}))
        tags = {schema.TAG_EXPERIMENT_DIR: str(sweep_dir)}
        assert resume_command(tags, uri) == f"mjp sweep resume {sweep_dir}"
    finally:
        server.shutdown()


def test_a_sweep_whose_parent_run_was_deleted_is_shown_so_and_its_resume_refused_in_one_line(store, capsys, monkeypatch):
    """MLflow refuses writes to a deleted run: ``status`` says it is deleted (and recommends no
    resume), ``resume`` is refused before anything is written, naming MLflow's restore command."""
    import mlflow

    from sweep.study.load import load_study
    from sweep.tuner.state import read_state, write_state

    uri, sweep_dir, _ = store
    monkeypatch.setenv("COLUMNS", "200")
    state = read_state(str(sweep_dir))
    write_state(str(sweep_dir), state.__class__(**{**state.__dict__, "study_digest": load_study("quickstart", check=False).digest}))
    mlflow.MlflowClient(uri).delete_run(state.parent_run_id)
    assert main(["sweep", "status", str(sweep_dir)]) == 0
    assert "[deleted in MLflow: restore its run to resume it]" in capsys.readouterr().out
    assert main(["sweep", "resume", str(sweep_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"parent run {state.parent_run_id} is in a deleted run of the store at {uri}" in err, err
    assert f"mlflow runs restore --run-id {state.parent_run_id}" in err
    assert mlflow.MlflowClient(uri).get_run(state.parent_run_id).info.lifecycle_stage == "deleted"
