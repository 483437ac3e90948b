import pandas as pd

from analysis.report import write_report
from analysis.runs import tidy
from analysis.tables import group_columns, paper_table, to_latex, to_markdown


def runs_frame():
    rows = []
    for variant, sample, top1 in [("baseline", "A", (0.80, 0.82)), ("jp_unk_dal_mlp", "J", (0.81, 0.85))]:
        for seed, acc in enumerate(top1):
            rows.append({
                "run_id": f"{sample}{seed}", "status": "FINISHED", "variant": variant, "sample.mjp.variant": sample,
                "sample.runtime.seed": seed, "val/top1": acc, "val/consistency": 0.6 if sample == "A" else 0.9,
                "val/diff_norm": 10.0, "val/top1_shuffled_0.9": 0.3, "privacy/c_psnr": 20.0 if sample == "A" else 8.0,
            })
    rows.append({"run_id": "X", "status": "FAILED", "variant": "baseline", "sample.mjp.variant": "A", "sample.runtime.seed": 2, "val/top1": 0.1})
    return pd.DataFrame(rows)


def test_seeds_are_pooled_into_mean_and_std_with_delta_to_baseline():
    runs = runs_frame()
    assert group_columns(runs) == ["sample.mjp.variant"]
    table = paper_table(runs)
    assert list(table["mjp.variant"]) == ["A: baseline", "J: jp_unk_dal_mlp"]
    assert list(table["top-1 (%)"]) == ["81.0 ± 1.4", "83.0 ± 2.8"]
    assert list(table["Δ top-1"]) == ["+0.0", "+2.0"]
    assert list(table["consistency (%)"]) == ["60.0 ± 0.0", "90.0 ± 0.0"]
    assert list(table["(c) PSNR"]) == ["20.00 ± 0.00", "8.00 ± 0.00"]
    assert list(table["runs"]) == ["2", "2"]  # the failed run is left out


def test_formats(tmp_path):
    table = paper_table(runs_frame())
    md = to_markdown(table)
    assert md.splitlines()[0].startswith("| mjp.variant | top-1 (%) |") and "| A: baseline | 81.0 ± 1.4 |" in md
    tex = to_latex(table, "Table 4")
    assert r"81.0 $\pm$ 1.4" in tex and r"top-1 (\%)" in tex and r"\begin{tabular}" in tex
    report = write_report(runs_frame(), tmp_path / "r", "Test")
    assert {p.name for p in report.parent.iterdir()} >= {"report.md", "table.md", "table.csv", "table.tex", "runs.csv", "metrics.png", "top1_vs_shuffle_ratio.png"}
    assert "1 run(s) did not finish: X (FAILED)" in report.read_text()


def test_tidy_renames_mlflow_columns_and_parses_params():
    raw = pd.DataFrame({
        "run_id": ["r"], "status": ["FINISHED"], "start_time": [0], "params.mjp.mask_ratio": ["0.27"],
        "params.mjp.dal": ["mlp"], "metrics.val/top1": [0.5], "tags.mjp.variant": ["jp"], "tags.mjp.sample.mjp.variant": ["E"],
    })
    runs = tidy(raw)
    assert runs.loc[0, "mjp.mask_ratio"] == 0.27 and runs.loc[0, "mjp.dal"] == "mlp"
    assert runs.loc[0, "val/top1"] == 0.5 and runs.loc[0, "variant"] == "jp" and runs.loc[0, "sample.mjp.variant"] == "E"
