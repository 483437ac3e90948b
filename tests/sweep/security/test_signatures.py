"""A sweep directory resumes only with the pickles this platform wrote into it for this user:
an unsigned, changed or re-signed pickle is refused before anything unpickles it."""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.security.last_save import LAST_SAVE, keep_last_save
from sweep.security.signatures import MANIFEST, cut_copies, key_path, sign_files, sign_tree, verify_sweep_dir
from sweep.tuner.state import SweepState
from trainables.errors import UserError

ROOT = Path(__file__).resolve().parents[3]


class MakesMarker:
    """Unpickling this creates ``path``: the proof that a file in the directory ran code."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MJP_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def signed_sweep(tmp: Path) -> Path:
    """A directory shaped like a sweep's, its Tune files signed as the sweep signs them."""
    staging, sweep = tmp / "staging", tmp / "sweep"
    for d in (staging / "trial_1", sweep / "trial_1"):
        d.mkdir(parents=True)
    files = {
        "experiment_state-1.json": b'{"trial_data": []}',
        "searcher-state-1.pkl": pickle.dumps({"a": 1}),
        "search_gen_state-1.json": pickle.dumps({"b": 2}),
        "trial_1/params.pkl": pickle.dumps({"lr": 0.1}),
    }
    for rel, content in files.items():
        (staging / rel).write_bytes(content)
        (sweep / rel).write_bytes(content)
    state = SweepState(name="x", study="quickstart", uri="sqlite:///m.db", experiment="e", parent_run_id="p", extra={"optim.epochs": 40})
    (sweep / "mjp_sweep.json").write_text(state.to_json())
    (sweep / "trial_1" / "result.json").write_text("{}")  # plain JSON in a trial folder: never unpickled
    sign_files(str(sweep), {"mjp_sweep.json": (sweep / "mjp_sweep.json").read_bytes()})  # as sweep.tuner.state.write_state does
    keep_last_save(str(sweep), sign_tree(str(sweep), str(staging)))  # as SweepSigner does at each save
    (sweep / "tuner.pkl").write_bytes(pickle.dumps({"tuner": 1}))
    sign_files(str(sweep), {"tuner.pkl": (sweep / "tuner.pkl").read_bytes()})
    return sweep


def test_the_key_is_made_on_first_use_for_this_user_only(home, tmp_path):
    assert not key_path().exists()
    signed_sweep(tmp_path)
    assert key_path().parent == home and stat.S_IMODE(key_path().stat().st_mode) == 0o600
    verify_sweep_dir(str(tmp_path / "sweep"))  # a genuine directory passes
    key_path().chmod(0o644)
    with pytest.raises(UserError, match="accessible to other users"):
        verify_sweep_dir(str(tmp_path / "sweep"))


@pytest.mark.parametrize("where", ["evil.pkl", "trial_1/checkpoint_000000/evil.pkl", "experiment_state-2.json"])
def test_a_crafted_pickle_anywhere_is_refused_and_never_runs(home, tmp_path, where):
    sweep = signed_sweep(tmp_path)
    marker = tmp_path / "marker"
    (sweep / where).parent.mkdir(parents=True, exist_ok=True)
    (sweep / where).write_bytes(pickle.dumps(MakesMarker(marker)))
    with pytest.raises(UserError, match=f"{where} was not written by this sweep"):
        verify_sweep_dir(str(sweep))
    assert not marker.exists()


@pytest.mark.parametrize("name", ["tuner.pkl", "searcher-state-1.pkl", "trial_1/params.pkl", "search_gen_state-1.json"])
def test_a_changed_pickle_is_refused(home, tmp_path, name):
    sweep = signed_sweep(tmp_path)
    (sweep / name).write_bytes(pickle.dumps(MakesMarker(tmp_path / "marker")))
    with pytest.raises(UserError, match=f"{name} was changed after this sweep wrote it"):
        verify_sweep_dir(str(sweep))


def test_a_missing_forged_or_foreign_manifest_is_refused(home, tmp_path, monkeypatch):
    sweep = signed_sweep(tmp_path)
    manifest = json.loads((sweep / MANIFEST).read_text())
    evil = pickle.dumps(MakesMarker(tmp_path / "marker"))
    (sweep / "tuner.pkl").write_bytes(evil)
    import hashlib
    import hmac

    # the attacker re-signs the changed file with a key of their own
    manifest["files"]["tuner.pkl"] = [hmac.new(b"k" * 32, b"x", hashlib.sha256).hexdigest()]
    (sweep / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="was not made with your signing key"):
        verify_sweep_dir(str(sweep))
    (sweep / MANIFEST).unlink()
    with pytest.raises(UserError, match="has no signature manifest"):
        verify_sweep_dir(str(sweep))
    monkeypatch.setenv("MJP_HOME", str(tmp_path / "another-user"))
    with pytest.raises(UserError, match="you have no sweep signing key"):
        verify_sweep_dir(str(sweep))
    theirs = signed_sweep(tmp_path / "theirs")
    monkeypatch.setenv("MJP_HOME", str(home))
    with pytest.raises(UserError, match="was not made with your signing key"):
        verify_sweep_dir(str(theirs))


def test_an_empty_trial_file_the_sweep_signed_passes_an_unsigned_one_is_refused(home, tmp_path):
    """Tune copies its state into the directory file by file; a driver ended mid-copy leaves a trial's files
    made and not yet written (seen after a ``scancel``): nothing to unpickle, and the resume goes on."""
    sweep = signed_sweep(tmp_path)
    (sweep / "trial_1" / "params.pkl").write_bytes(b"")
    verify_sweep_dir(str(sweep))
    cut = cut_copies(str(sweep))
    assert cut.emptied == ["trial_1/params.pkl"] and cut.restored == {}
    assert cut.said() == ["removed 1 empty file(s) its driver's last copy left: trial_1/params.pkl"]
    (sweep / "trial_2").mkdir()
    (sweep / "trial_2" / "params.pkl").write_bytes(b"")
    with pytest.raises(UserError, match="trial_2/params.pkl was not written by this sweep"):
        cut_copies(str(sweep))


def test_an_empty_state_file_at_the_top_is_put_back_with_its_save_from_the_last_whole_save(home, tmp_path):
    """The experiment's or the searcher's state left empty by a driver ended mid-copy: Tune cannot go
    on without it, so the resume writes back the last whole save, which was kept before the copy began.
    That save may be newer than the files beside it (the copy had not reached them): all of it comes back."""
    sweep = signed_sweep(tmp_path)
    staging = tmp_path / "staging"
    newer = {"searcher-state-1.pkl": pickle.dumps({"a": 2}), "experiment_state-1.json": b'{"trial_data": [1]}'}
    for rel, content in newer.items():
        (staging / rel).write_bytes(content)
    keep_last_save(str(sweep), sign_tree(str(sweep), str(staging)))  # a save whose copy ...
    (sweep / "searcher-state-1.pkl").write_bytes(b"")  # ... stopped here: the experiment's state is the old one
    cut = cut_copies(str(sweep))
    assert cut.emptied == [] and cut.restored == newer
    assert cut.said() == ["put back 2 state file(s) from its last whole save: experiment_state-1.json, searcher-state-1.pkl"]
    verify_sweep_dir(str(sweep))  # mendable: passes


def test_an_empty_state_file_is_refused_without_a_whole_save_that_this_sweep_signed(home, tmp_path):
    sweep = signed_sweep(tmp_path)
    (sweep / "searcher-state-1.pkl").write_bytes(b"")
    refusal = (
        f"refusing to resume {sweep}: Tune's state file searcher-state-1.pkl is empty (its driver ended while Tune copied it in), "
        "and Tune cannot continue the sweep without it; start the sweep again with `mjp sweep run`"
    )
    for kept in ("", "{not json", json.dumps({"files": {"searcher-state-1.pkl": "%%%"}})):  # none (an older sweep), unreadable
        (sweep / LAST_SAVE).write_text(kept) if kept else (sweep / LAST_SAVE).unlink()
        with pytest.raises(UserError) as refused:
            verify_sweep_dir(str(sweep))
        assert str(refused.value) == refusal
    # a save planted beside the files: what it would put back is checked against the signatures, and nothing runs
    marker = tmp_path / "marker"
    keep_last_save(str(sweep), {"searcher-state-1.pkl": pickle.dumps(MakesMarker(marker))})
    with pytest.raises(UserError, match=f"its last whole save \\({LAST_SAVE}\\) holds a searcher-state-1.pkl this sweep did not sign"):
        cut_copies(str(sweep))
    assert not marker.exists()


def test_an_older_signed_version_still_verifies(home, tmp_path):
    """A driver killed while Tune copied a new state leaves the old version: that one verifies."""
    sweep = signed_sweep(tmp_path)
    old = (sweep / "searcher-state-1.pkl").read_bytes()
    (tmp_path / "staging" / "searcher-state-1.pkl").write_bytes(pickle.dumps({"a": 2}))
    sign_tree(str(sweep), str(tmp_path / "staging"))
    assert (sweep / "searcher-state-1.pkl").read_bytes() == old
    verify_sweep_dir(str(sweep))


def test_mjp_sweep_resume_refuses_a_planted_pickle_in_one_line_exit_2(home, tmp_path):
    sweep = signed_sweep(tmp_path)
    marker = tmp_path / "marker"
    (sweep / "searcher-state-9.pkl").write_bytes(pickle.dumps(MakesMarker(marker)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "sweep", "resume", str(sweep)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "searcher-state-9.pkl was not written by this sweep" in done.stderr, done.stderr
    assert not marker.exists()


def test_an_edited_or_unsigned_state_file_is_refused(home, tmp_path):
    """``mjp_sweep.json`` names the study, its overrides, the tracking store and the Optuna
    storage a resume follows: an edit (epochs 40 -> 12) is refused like a changed pickle."""
    sweep = signed_sweep(tmp_path)
    state = sweep / "mjp_sweep.json"
    state.write_text(state.read_text().replace("40", "12"))
    with pytest.raises(UserError, match="mjp_sweep.json was changed after this sweep wrote it"):
        verify_sweep_dir(str(sweep))
    manifest = json.loads((sweep / MANIFEST).read_text())
    del manifest["files"]["mjp_sweep.json"]
    (sweep / MANIFEST).unlink()
    sign_files(str(sweep), {k: (sweep / k).read_bytes() for k in manifest["files"]})  # a manifest without the state file
    with pytest.raises(UserError, match="state file mjp_sweep.json is not signed"):
        verify_sweep_dir(str(sweep))


def test_a_study_file_edited_after_the_sweep_started_is_refused_by_the_resume(home, tmp_path):
    """The signed state names the study file; the resume reads it again and must train what the
    sweep started with: an edited study (epochs 30 -> 12) is one line before Ray starts."""
    from sweep.study.load import load_study
    from sweep.study.names import STUDIES_DIR
    from sweep.tuner.run import resume_sweep
    from sweep.tuner.state import SweepState, write_state

    study_file = tmp_path / "mine.yaml"
    study_file.write_text((STUDIES_DIR / "quickstart.yaml").read_text())
    started = load_study(str(study_file), check=False)
    sweep = signed_sweep(tmp_path)
    write_state(
        str(sweep),
        SweepState(
            study=started.source,
            study_digest=started.digest,
            name="mine-1",
            uri=f"sqlite:///{tmp_path}/mlflow.db",
            experiment="mjp-mine",
            parent_run_id="0" * 32,
        ),
    )
    assert load_study(str(study_file), check=False).digest == started.digest  # the same files: the same digest
    study_file.write_text(study_file.read_text().replace("optim: {epochs: 30}", "optim: {epochs: 12}"))
    with pytest.raises(UserError, match=f"the study {study_file} or its base config changed since sweep mine-1 started"):
        resume_sweep(str(sweep))


def test_a_sweep_started_under_the_flat_layout_is_refused_by_the_resume_in_one_line(home, tmp_path):
    """Tune pickled that sweep's trainable and callbacks under module paths that moved: the resume
    says so and names the commit to resume it from, before Ray or an unpickle."""
    from sweep.tuner.state import LAYOUT_LAST_COMMIT

    sweep = signed_sweep(tmp_path)
    old = json.loads((sweep / "mjp_sweep.json").read_text())
    del old["layout"]  # as every sweep started before the field existed
    (sweep / "mjp_sweep.json").write_text(json.dumps(old))
    sign_files(str(sweep), {"mjp_sweep.json": (sweep / "mjp_sweep.json").read_bytes()})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "sweep.cli", "sweep", "resume", str(sweep)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    err = done.stderr.strip()
    assert err.count("\n") == 0 and "older layout" in err and f"git checkout {LAYOUT_LAST_COMMIT[1]}" in err, err
