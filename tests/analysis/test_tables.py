import pandas as pd

from analysis.report import ReportContext, write_report
from analysis.runs import tidy
from analysis.tables import group_columns, missing_notes, paper_comparison, study_table, to_latex, to_markdown


def runs_frame():
    rows = []
    for variant, sample, top1 in [("baseline", "A", (0.80, 0.82)), ("jp_unk_dal_mlp", "J", (0.81, 0.85))]:
        for seed, acc in enumerate(top1):
            rows.append({
                "run_id": f"{sample}{seed}", "run_name": f"{sample}-s{seed}", "experiment_id": "1", "status": "FINISHED", "variant": variant,
                "sample.mjp.variant": sample, "sample.runtime.seed": seed, "val/top1": acc, "val/consistency": 0.6 if sample == "A" else 0.9,
                "val/diff_norm": 10.0, "val/top1_shuffled_0": acc, "val/top1_shuffled_0.9": 0.3, "privacy/c_psnr": 20.0 if sample == "A" else 8.0,
            })
    rows.append({"run_id": "X", "run_name": "A-s2", "experiment_id": "1", "status": "FAILED", "variant": "baseline", "sample.mjp.variant": "A", "sample.runtime.seed": 2, "val/top1": 0.1})
    return pd.DataFrame(rows)


def test_seeds_are_pooled_into_mean_std_and_n_with_deltas_to_the_baseline():
    runs = runs_frame()
    assert group_columns(runs) == ["sample.mjp.variant"]
    table = study_table(runs)
    assert list(table["mjp.variant"]) == ["A: baseline", "J: JP + UNK + DAL (NLN)"]
    assert list(table["top-1 (%)"]) == ["81.0 ± 1.4", "83.0 ± 2.8"]
    assert list(table["Δ top-1"]) == ["", "+2.0"] and list(table["Δ consistency"]) == ["", "+30.0"]
    assert list(table["consistency (%)"]) == ["60.0 ± 0.0", "90.0 ± 0.0"]
    assert list(table["(c) PSNR"]) == ["20.00 ± 0.00", "8.00 ± 0.00"]
    assert list(table["n"]) == ["2", "2"]  # the failed run is left out
    assert list(table.columns[:3]) == ["mjp.variant", "top-1 (%)", "Δ top-1"]


def test_one_run_per_row_shows_no_plus_minus():
    single = runs_frame()
    single = single[single["sample.runtime.seed"] == 0]
    assert list(study_table(single)["top-1 (%)"]) == ["80.0", "81.0"]


def test_a_missing_metric_is_an_empty_cell_with_a_note():
    runs = runs_frame()
    runs.loc[runs.run_id == "J1", "val/consistency"] = None
    table = study_table(runs)
    assert list(table["consistency (%)"]) == ["60.0 ± 0.0", "90.0"]  # J from its one run that has it
    notes = missing_notes(runs)
    assert "J-s1: no consistency (%) (val/consistency was not logged)" in notes
    assert "A-s2: failed, left out of the table" in notes
    runs["val/top1_shuffled_0.9"] = None
    assert "top-1 @ shuffle 0.9 (%)" not in study_table(runs) or set(study_table(runs)["top-1 @ shuffle 0.9 (%)"]) == {""}


def test_the_paper_beside_ours_for_table_4():
    side = paper_comparison(runs_frame(), "4")
    assert list(side["paper row"]) == ["A", "J"]
    assert list(side["top-1: paper"]) == ["79.8", "80.5"] and list(side["top-1: ours"]) == ["81.0 ± 1.4", "83.0 ± 2.8"]
    assert list(side["consistency: paper"]) == ["64.3", "82.9"]


def test_formats_and_the_report(tmp_path):
    table = study_table(runs_frame())
    md = to_markdown(table)
    assert md.splitlines()[0].startswith("| mjp.variant | top-1 (%) | Δ top-1 |") and "| A: baseline | 81.0 ± 1.4 |" in md
    tex = to_latex(table, "Table 4")
    assert r"81.0 $\pm$ 1.4" in tex and r"top-1 (\%)" in tex and r"\begin{tabular}" in tex
    files = write_report(runs_frame(), tmp_path / "r", ReportContext(study="t", title="Test", description="What it measures.", paper_tables=("4",)))
    names = {p.name for p in files.directory.iterdir()} | {p.name for p in (files.directory / "figures").iterdir()}
    assert names >= {"report.md", "report.html", "table.md", "table.csv", "table.tex", "paper_table_4.md", "runs.csv",
                     "metrics.png", "metrics.svg", "top1_vs_shuffle_ratio.png", "top1_vs_shuffle_ratio.svg"}
    html = files.html.read_text()
    assert "A-s2: failed, left out of the table" in html and 'id="paper-4"' in html and "What it measures." in html
    assert 'alt="metrics"' not in html and html.count("data:image/png;base64,") == 2


def test_tidy_renames_mlflow_columns_and_parses_params():
    raw = pd.DataFrame({
        "run_id": ["r"], "experiment_id": ["1"], "status": ["FINISHED"], "start_time": [0], "params.mjp.mask_ratio": ["0.27"],
        "params.mjp.dal": ["mlp"], "metrics.val/top1": [0.5], "tags.mjp.variant": ["jp"], "tags.mjp.sample.mjp.variant": ["E"],
    })
    runs = tidy(raw)
    assert runs.loc[0, "mjp.mask_ratio"] == 0.27 and runs.loc[0, "mjp.dal"] == "mlp"
    assert runs.loc[0, "val/top1"] == 0.5 and runs.loc[0, "variant"] == "jp" and runs.loc[0, "sample.mjp.variant"] == "E"
