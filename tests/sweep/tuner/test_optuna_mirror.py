"""The Optuna study a sweep mirrors (for optuna-dashboard): named objectives, real trial times, and
each trial's MLflow run id and variant, read back with Optuna."""

import datetime

import optuna
import pytest
from ray.tune.experiment import Trial

from sweep.study.load import load_study
from sweep.tuner.optuna_mirror import OptunaMirror
from tests.killed_writer import killed_while_making
from trainables.config.build import load_config
from trainables.launch.trial import start_run
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker

#: Optuna's second statement for a new storage, after CREATE TABLE studies
UNIQUE_NAME_INDEX = "CREATE UNIQUE INDEX ix_studies_study_name"


def test_mirrored_trials_have_times_metric_names_and_their_mlflow_run(tmp_path):
    uri, url = f"sqlite:///{tmp_path}/mlflow.db", f"sqlite:///{tmp_path}/optuna.db"
    parent = RunTracker.create(uri, "mjp-quickstart", run_name="quickstart-x", tags={schema.TAG_KIND: "sweep"})
    cfg = load_config("trainables/configs/digits_vit_tiny.yaml", ["mjp.variant=A", "tracking.experiment=mjp-quickstart"])
    child = start_run(
        cfg,
        uri,
        run_name="A-baseline-s0",
        tags={schema.TAG_TRIAL_ID: "t1", schema.TAG_LABEL: "A baseline seed 0"},
        parent_run_id=parent.run_id,
    )
    study = load_study("quickstart", smoke=True, check=False)
    mirror = OptunaMirror(url, "quickstart-x", study.config, epochs=3, tracking=(uri, "mjp-quickstart", parent.run_id))
    done, stopped = (
        Trial("fake", config={"mjp.variant": "A"}, trial_id="t1", stub=True),
        Trial("fake", config={"mjp.variant": "J"}, trial_id="t2", stub=True),
    )
    for trial in (done, stopped):
        mirror.on_trial_start(0, [], trial)
    for epoch in (1, 2, 3):
        done.update_last_result({"epoch": epoch, "val/top1": [0.25, 0.5, 0.75][epoch - 1]})
        mirror.on_trial_result(0, [], done, done.last_result)
    stopped.update_last_result({"epoch": 1, "val/top1": 0.1})
    mirror.on_trial_result(0, [], stopped, stopped.last_result)
    mirror.on_trial_complete(0, [], done)
    mirror.on_trial_complete(0, [], stopped)
    mirror.on_trial_complete(0, [], done)  # once only

    back = optuna.load_study(study_name="quickstart-x", storage=url)
    assert back.metric_names == ["val/top1"]
    first, second = back.get_trials()
    run = child.run()
    assert (
        first.state == optuna.trial.TrialState.COMPLETE and first.value == 0.75 and first.intermediate_values == {1: 0.25, 2: 0.5, 3: 0.75}
    )
    assert first.datetime_start == datetime.datetime.fromtimestamp(run.info.start_time / 1000)  # the MLflow run's start
    assert first.datetime_complete > first.datetime_start and first.duration.total_seconds() > 0
    assert first.user_attrs == {
        "tune_trial_id": "t1",
        "mlflow_run_id": child.run_id,
        "mlflow_run_name": "A-baseline-s0",
        "variant": "baseline",
        "label": "A baseline seed 0",
    }
    # no MLflow run found: the start Tune reported, the trial still marked pruned by the scheduler
    assert second.state == optuna.trial.TrialState.PRUNED and "mlflow_run_id" not in second.user_attrs
    assert second.datetime_start == mirror.started["t2"] and second.datetime_complete >= second.datetime_start


def test_an_unreadable_optuna_storage_is_one_line_naming_it(tmp_path):
    from sweep.study.load import load_study
    from sweep.tuner.optuna_mirror import check_storage
    from trainables.errors import UserError

    config = load_study("quickstart").config
    url = f"sqlite:///{tmp_path}/optuna.db"
    check_storage(url, "sweep-1", config)  # a fresh storage is created
    (tmp_path / "optuna.db").write_bytes(b"not a database " * 400)
    with pytest.raises(UserError) as err:
        check_storage(url, "sweep-1", config)
    assert str(err.value).startswith(
        f"the sweep's Optuna storage {tmp_path}/optuna.db cannot be read (DatabaseError: "
    ) and "\n" not in str(err.value)


def test_a_sweep_killed_while_it_creates_its_storage_leaves_none_and_the_next_creates_it_whole(tmp_path):
    from sweep.tuner.optuna_mirror import check_storage, open_study

    url = f"sqlite:///{tmp_path}/optuna.db"
    check = "from sweep.study.load import load_study; from sweep.tuner.optuna_mirror import check_storage; "
    check += f"check_storage({url!r}, 'sweep-1', load_study('quickstart').config)"
    killed_while_making(check, before=UNIQUE_NAME_INDEX)
    assert not (tmp_path / "optuna.db").exists(), "a storage cut short was left where the next sweep opens it"
    config = load_study("quickstart").config
    check_storage(url, "sweep-1", config)  # the resume, or the next sweep
    for _ in range(3):  # every later open finds the one study (a storage without the unique index added it again)
        assert len(open_study(url, "sweep-1", config).get_trials()) == 0
    assert optuna.study.get_all_study_names(url) == ["sweep-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["optuna.db"], "the killed creator's aside file is gone"


def test_a_storage_cut_short_before_its_unique_index_is_refused_in_one_line(tmp_path):
    from sweep.tuner.optuna_mirror import check_storage
    from trainables.errors import UserError

    url = f"sqlite:///{tmp_path}/optuna.db"
    # as Optuna made it in place, before the sweep made its storage aside
    killed_while_making(f"import optuna; optuna.create_study(storage={url!r}, study_name='sweep-1')", before=UNIQUE_NAME_INDEX)
    with pytest.raises(UserError) as err:
        check_storage(url, "sweep-1", load_study("quickstart").config)
    assert str(err.value) == (
        f"the sweep's Optuna storage {tmp_path}/optuna.db cannot be read (ValueError: its studies table has no unique index "
        "on study_name: its creation was cut short); move it aside (the MLflow runs do not depend on it) and run the command again"
    )
