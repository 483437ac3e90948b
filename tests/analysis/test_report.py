"""A study's report: the table as Markdown and LaTeX, the files and figures written, the HTML page
without NaN cells or empty columns, and the seed-noise caveat of a best trial of one seed."""

from analysis.report import ReportContext, write_report
from analysis.tables import study_table, to_latex, to_markdown
from tests.analysis.runs_made import runs_frame


def test_formats_and_the_report(tmp_path):
    table = study_table(runs_frame())
    md = to_markdown(table)
    assert md.splitlines()[0].startswith("| mjp.variant | top-1 (%) | Δ top-1 |") and "| A: baseline | 81.0 ± 1.4 |" in md
    tex = to_latex(table, "Table 4")
    assert r"81.0 $\pm$ 1.4" in tex and r"top-1 (\%)" in tex and r"\begin{tabular}" in tex
    files = write_report(
        runs_frame(), tmp_path / "r", ReportContext(study="t", title="Test", description="What it measures.", paper_tables=("4",))
    )
    names = {p.name for p in files.directory.iterdir()} | {p.name for p in (files.directory / "figures").iterdir()}
    assert names >= {
        "report.md",
        "report.html",
        "table.md",
        "table.csv",
        "table.tex",
        "paper_table_4.md",
        "runs.csv",
        "metrics.png",
        "metrics.svg",
        "top1_vs_shuffle_ratio.png",
        "top1_vs_shuffle_ratio.svg",
    }
    html = files.html.read_text()
    assert "A-s2: failed, left out of the table" in html and 'id="paper-4"' in html and "What it measures." in html
    assert 'alt="metrics"' not in html and html.count("data:image/png;base64,") == 2


def test_an_empty_column_is_not_shown_in_the_report():
    from analysis.report import runs_table

    runs = runs_frame()
    clean = runs.assign(error=float("nan"))
    assert "error" not in runs_table(clean).columns and "status" in runs_table(clean).columns
    one = clean.astype({"error": object})
    one.loc[0, "error"] = "CUDA out of memory"
    shown = runs_table(one)
    assert "CUDA out of memory" in set(shown["error"]) and "nan" not in set(shown["error"])


def test_the_report_html_has_no_nan_cells(tmp_path):
    files = write_report(
        runs_frame().assign(error=float("nan"), **{"val/diff_norm": float("nan")}), tmp_path / "r", ReportContext(study="t", title="T")
    )
    html = files.html.read_text()
    assert ">nan<" not in html.lower() and "<th>error</th>" not in html and "Diff. Norm" not in files.table.columns


def test_the_best_trial_of_one_seed_per_configuration_carries_the_seed_noise_caveat(tmp_path):
    runs = runs_frame()
    single = runs[runs.run_id.isin(["A1", "J1"])]
    assert len(single) == 2
    html = write_report(single, tmp_path / "one", ReportContext(study="t", title="T", best="J seed 1")).html.read_text()
    assert "J seed 1 One run per configuration: its lead over the others may be seed noise" in html
    html = write_report(runs, tmp_path / "seeds", ReportContext(study="t", title="T", best="J seed 1")).html.read_text()
    assert "J seed 1" in html and "may be seed noise" not in html
