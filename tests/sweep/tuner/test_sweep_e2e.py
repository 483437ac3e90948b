"""Sweeps end to end on CPU: Ray Tune + Optuna + in-process trials + a temporary SQLite MLflow,
read back by the analysis; the console as a user in a pipe sees it. One seeded sweep (a module-scoped
fixture) read by every check here; an interrupted sweep's resume is test_sweep_resume_e2e.py's,
ASHA's early stops test_sweep_asha_e2e.py's."""

import io
import json
from pathlib import Path

import mlflow
import pytest

from analysis.runs import load_runs, load_sweeps
from mjp import keys
from sweep.security.signatures import sign_files
from sweep.study.load import load_study
from sweep.tuner.owner import driver_tag
from sweep.tuner.run import run_sweep
from tests.sweep.tuner.tiny_studies import study_file
from trainables.tracking import schema

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seeded_sweep(tmp_path_factory, local_ray):
    """A real sweep: Table 4 rows A and J, two seeds each, a preset, through Ray, Optuna, MLflow."""
    tmp = tmp_path_factory.mktemp("seeded")
    uri = f"sqlite:///{tmp}/mlflow.db"
    space = {
        "mjp.variant": {"type": "grid", "values": ["A", "J"]},
        "speed": {"type": "grid", "values": ["fast"], "presets": {"fast": {"optim.base_lr": 0.05}}},
    }
    study = load_study(study_file(tmp, space, seeds=[0, 1], paper=[4], description="A and J on digits, two seeds."))
    console = io.StringIO()
    outcome = run_sweep(study, storage=str(tmp / "ray"), uri=uri, stream=console)  # as `mjp sweep run --uri` passes it
    return tmp, uri, study, outcome, console.getvalue()


def test_a_seeded_sweep_makes_one_parent_and_a_child_per_trial(seeded_sweep):
    tmp, uri, study, outcome, text = seeded_sweep
    assert len(outcome.trials) == 4 and not outcome.failed and not outcome.interrupted
    assert "Traceback" not in text and "\x1b[" not in text, text
    assert "A-baseline-fast-s0" in text and "J-jp_unk_dal_mlp-fast-s1" in text
    assert len(text.splitlines()) < 25, text

    sweeps = load_sweeps(uri, "e2e")
    assert len(sweeps) == 1 and sweeps.run_id[0] == outcome.parent_run_id and sweeps.status[0] == "FINISHED"
    runs = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id)
    assert len(runs) == 4 and set(runs.status) == {"FINISHED"}
    assert set(runs["run_name"]) == {f"{v}-fast-s{s}" for v in ("A-baseline", "J-jp_unk_dal_mlp") for s in (0, 1)}
    assert set(runs["variant"]) == {"baseline", "jp_unk_dal_mlp"} and set(runs["optim.base_lr"]) == {0.05}  # the preset reached the trial
    assert set(runs["table4.row"]) == {"A", "J"}
    assert set(runs["tracking.uri"]) == {uri} and outcome.uri == uri  # each trial's config names the store it really wrote to
    for key in ("val/top1", "val/consistency", "val/diff_norm", "val/top1_shuffled_0.9"):
        assert runs[key].between(0, 100).all(), key
    assert len(mlflow.search_runs(experiment_names=["sweep-test"])) == 5  # nothing else was created
    client = mlflow.MlflowClient(uri)
    parent = client.get_run(outcome.parent_run_id).data
    assert parent.params["search.algorithm"] == "grid" and "best/val/top1" in parent.metrics
    assert parent.tags[schema.TAG_COMMAND] == f"mjp sweep run {study.config.name}"  # what results captions say (`mjp demo` for the demo)
    assert parent.tags[schema.TAG_DRIVER] == driver_tag()  # this process ran the sweep: `mjp sweep status` tells it from a reused pid

    import optuna  # the sweep as an Optuna study beside the MLflow store, for optuna-dashboard

    mirrored = optuna.load_study(study_name=parent.params["experiment_dir"].rsplit("/", 1)[1], storage=f"sqlite:///{tmp}/optuna.db")
    assert sorted((t.params["mjp.variant"], t.params["runtime.seed"]) for t in mirrored.trials) == [("A", 0), ("A", 1), ("J", 0), ("J", 1)]
    assert {t.state.name for t in mirrored.trials} == {"COMPLETE"} and all(sorted(t.intermediate_values) == [1, 2] for t in mirrored.trials)


def test_a_resume_of_a_finished_sweep_changes_nothing_and_says_so(seeded_sweep, capsys):
    from sweep.cli import main

    _, uri, study, outcome, _ = seeded_sweep
    client = mlflow.MlflowClient(uri)

    def runs() -> dict:
        found = client.search_runs([client.get_experiment_by_name("sweep-test").experiment_id])
        return {r.info.run_id: (r.info.status, r.info.end_time, dict(r.data.tags)) for r in found}

    def files() -> dict:
        return {p: p.read_bytes() for p in Path(outcome.experiment_dir).rglob("*") if p.is_file() and p.name != "mjp_sweep.lock"}

    # as in the demo's saved state: a trial at its last epoch whose final result Tune saved as not done
    state_file = max(Path(outcome.experiment_dir).glob("experiment_state-*.json"))
    saved_state = json.loads(state_file.read_text())
    runtime = json.loads(saved_state["trial_data"][0][1])
    runtime["last_result"]["done"] = False
    saved_state["trial_data"][0][1] = json.dumps(runtime)
    state_file.write_text(json.dumps(saved_state))
    sign_files(outcome.experiment_dir, {state_file.name: state_file.read_bytes()})  # as the sweep's own save would

    before, saved = runs(), files()
    assert main(["sweep", "resume", outcome.experiment_dir]) == 0
    printed = capsys.readouterr().out
    assert f"sweep {Path(outcome.experiment_dir).name} has finished" in printed and "nothing to resume, nothing changed" in printed
    assert printed.count("\n") == 1, printed
    assert runs() == before and files() == saved


def test_config_show_prints_what_each_trial_logged(seeded_sweep, capsys):
    from tests.sweep.commands.test_config_show import shown

    _, uri, study, outcome, _ = seeded_sweep
    client = mlflow.MlflowClient(uri)
    children = client.search_runs(
        [client.get_experiment_by_name("sweep-test").experiment_id], f"tags.`{schema.TAG_PARENT}` = '{outcome.parent_run_id}'"
    )
    assert len(children) == 4
    for run in children:
        sampled = {k.removeprefix(schema.TAG_SAMPLE_PREFIX): v for k, v in run.data.tags.items() if k.startswith(schema.TAG_SAMPLE_PREFIX)}
        _, printed = shown(capsys, study.source, *(a for k, v in sampled.items() for a in ("--set", f"{k}={v}")))
        logged = {k: v for k, v in run.data.params.items() if not k.startswith("table4.")}
        assert logged.pop("tracking.uri") == uri and printed.pop("tracking.uri") is None  # resolved when the sweep starts
        assert {k: str(v) for k, v in printed.items()} == logged, run.info.run_name


def test_seeds_give_different_runs_and_the_masks_of_a_seed_are_its_own(seeded_sweep):
    _, uri, _, outcome, _ = seeded_sweep
    runs = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id).set_index("run_name")
    j0, j1 = runs.loc["J-jp_unk_dal_mlp-fast-s0"], runs.loc["J-jp_unk_dal_mlp-fast-s1"]
    assert j0["runtime.seed"] == 0 and j1["runtime.seed"] == 1
    assert j0["mjp.seed"] != j1["mjp.seed"] and j0["eval.seed"] != j1["eval.seed"] and j0["data.seed"] != j1["data.seed"]


def test_mlflow_shows_what_each_run_is(seeded_sweep):
    _, uri, _, outcome, _ = seeded_sweep
    client = mlflow.MlflowClient(uri)
    child = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id).run_id[0]
    assert [m.step for m in client.get_metric_history(child, keys.VAL_TOP1)] == [1, 2]
    assert [m.step for m in client.get_metric_history(child, keys.VAL_CONSISTENCY)] == [0]  # once, no epoch axis
    assert not client.get_metric_history(child, "epoch")
    inputs = client.get_run(child).inputs.dataset_inputs
    assert {i.dataset.name for i in inputs} == {"digits-train", "digits-val"}
    assert '"num_images": 256' in next(i.dataset.profile for i in inputs if i.dataset.name == "digits-train")
    experiment = client.get_experiment_by_name("sweep-test")
    assert experiment.tags[schema.TAG_NOTE].startswith("A and J on digits, two seeds.")
    assert client.get_run(outcome.parent_run_id).data.tags[schema.TAG_NOTE].startswith("A and J on digits, two seeds.")


def test_the_report_of_a_real_sweep(seeded_sweep):
    from sweep.commands.analyze import publish_sweep_report

    tmp, uri, study, outcome, _ = seeded_sweep
    published = publish_sweep_report(outcome.parent_run_id, study, str(tmp / "reports"), uri)
    assert "| A: baseline |" in published.table and "± " in published.table  # two seeds: mean ± std
    # trained at 0.27: J beside Table 3's 0.27 column (80.3 top-1), not Table 4's J (the paper's 0.03 run)
    assert "| J: JP + UNK + DAL (NLN), fast | J (Table 3, γ=0.27) | " in published.paper["4"] and " 80.3 |" in published.paper["4"]
    figures = {p.name for p in (tmp / "reports" / "e2e" / "figures").iterdir()}
    assert {"metrics.png", "metrics.svg", "top1_vs_shuffle_ratio.png", "training_curves.png"} <= figures
    client = mlflow.MlflowClient(uri)
    logged = {a.path for a in client.list_artifacts(outcome.parent_run_id, "report")}
    assert "report/report.html" in logged and "report/table.md" in logged and "report/figures" in logged
    note = client.get_run(outcome.parent_run_id).data.tags[schema.TAG_NOTE]
    assert "| A: baseline |" in note and "report/report.html" in note


def test_the_report_renders_in_chromium(seeded_sweep):
    import shutil
    import subprocess

    from sweep.commands.analyze import build_report

    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    tmp, uri, _, outcome, _ = seeded_sweep
    files = build_report(uri, "e2e", tmp / "rendered", parent_run_id=outcome.parent_run_id)
    page = files.html.read_text()
    probe = (
        "<script>window.addEventListener('load', () => { document.body.dataset.images = document.images.length;"
        " document.body.dataset.decoded = [...document.images].filter(i => i.complete && i.naturalWidth > 0).length;"
        " document.body.dataset.tables = document.querySelectorAll('table').length; });</script></body>"
    )
    probed = files.html.with_name("probed.html")
    probed.write_text(page.replace("</body>", probe))
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    expected_tables = page.count("<table")
    assert f'data-tables="{expected_tables}"' in dom and expected_tables >= 3, dom[:500]
    images = page.count("<img ")
    assert images >= 3 and f'data-images="{images}"' in dom and f'data-decoded="{images}"' in dom
