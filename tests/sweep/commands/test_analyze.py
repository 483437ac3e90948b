"""``mjp analyze report|tables``, one handler: they refuse a study without sweeps in one line, before MLflow is imported,
and print the same tables, the last line alone telling them apart."""

import subprocess
import sys

from trainables.tracking import schema
from trainables.tracking.runs import RunTracker

PROBE = """
import sys
from sweep.cli import main
rc = main(sys.argv[1:])
print("mlflow imported" if "mlflow" in sys.modules else "mlflow not imported")
sys.exit(rc)
"""


def test_a_study_without_sweeps_is_refused_before_mlflow_is_imported(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    RunTracker.create(
        uri, "mjp-quickstart", run_name="quickstart-1", tags={schema.TAG_KIND: schema.KIND_SWEEP, schema.TAG_STUDY: "quickstart"}
    )
    for command, study, message in (
        ("report", "fashion", f"error: no sweep of study 'fashion' in {uri}; run `mjp sweep run fashion` first"),
        ("tables", "fashon", "did you mean fashion?"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, "analyze", command, "--study", study, "--uri", uri], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
        assert done.stdout.strip() == "mlflow not imported"


def test_a_study_with_sweeps_goes_on_to_mlflow(tmp_path):
    from trainables.tracking.sqlite_sweeps import sweep_studies

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    RunTracker.create(
        uri, "mjp-quickstart", run_name="quickstart-1", tags={schema.TAG_KIND: schema.KIND_SWEEP, schema.TAG_STUDY: "quickstart"}
    )
    RunTracker.create(uri, "mjp-quickstart", run_name="a-training", tags={schema.TAG_KIND: schema.KIND_TRAIN, schema.TAG_STUDY: "fashion"})
    assert sweep_studies(uri) == {"quickstart"}  # a training tagged with a study is no sweep
    assert sweep_studies(f"sqlite:///{tmp_path}/none.db") is None and sweep_studies("http://127.0.0.1:5000") is None


def test_tables_and_report_print_the_same_tables_and_differ_in_their_last_line(tmp_path, capsys):
    from mjp import keys
    from sweep.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(
        uri, "mjp-quickstart", run_name="quickstart-1", tags={schema.TAG_KIND: schema.KIND_SWEEP, schema.TAG_STUDY: "quickstart"}
    )
    parent.log_params({"study": "quickstart", "search.algorithm": "grid", "paper_tables": "4"})
    for letter, variant, top1 in (("A", "baseline", 0.9), ("J", "jp_unk_dal_mlp", 0.88)):
        child = RunTracker.create(
            uri,
            "mjp-quickstart",
            run_name=f"{letter}-s0",
            tags={schema.TAG_KIND: schema.KIND_TRAIN, schema.TAG_STUDY: "quickstart", schema.TAG_VARIANT: variant},
            parent_run_id=parent.run_id,
        )
        child.log_metrics({keys.VAL_TOP1: top1, keys.VAL_CONSISTENCY: 0.5}, step=1)
        child.set_status("FINISHED")
    parent.set_status("FINISHED")
    printed = {}
    for command in ("tables", "report"):
        assert main(["analyze", command, "--study", "quickstart", "--uri", uri, "--out", str(tmp_path), "--paper"]) == 0
        printed[command] = capsys.readouterr().out.rstrip("\n").splitlines()
    report = tmp_path / "quickstart"
    assert printed["tables"][:-1] == printed["report"][:-1]
    assert printed["report"][2].startswith("| A: baseline | 90.0 |") and any(line.startswith("Table 4") for line in printed["report"])
    assert printed["report"][-1] == f"report: {report / 'report.html'}"
    assert printed["tables"][-1] == f"report: {report / 'report.html'} (tables: {report}/table.md, .csv, .tex)"
