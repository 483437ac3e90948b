import pandas as pd
import pytest

from analysis.report import ReportContext, write_report
from analysis.runs import tidy
from analysis.tables import group_columns, missing_notes, paper_comparison, study_table, to_latex, to_markdown
from mjp import keys


def runs_frame():
    rows = []
    for variant, sample, top1 in [("baseline", "A", (0.80, 0.82)), ("jp_unk_dal_mlp", "J", (0.81, 0.85))]:
        for seed, acc in enumerate(top1):
            rows.append(
                {
                    "run_id": f"{sample}{seed}",
                    "run_name": f"{sample}-s{seed}",
                    "experiment_id": "1",
                    "status": "FINISHED",
                    "variant": variant,
                    "sample.mjp.variant": sample,
                    "sample.runtime.seed": seed,
                    "val/top1": acc,
                    "val/consistency": 0.6 if sample == "A" else 0.9,
                    "val/diff_norm": 10.0,
                    "val/top1_shuffled_0": acc,
                    "val/top1_shuffled_0.9": 0.3,
                    "privacy/c_psnr": 20.0 if sample == "A" else 8.0,
                }
            )
    rows.append(
        {
            "run_id": "X",
            "run_name": "A-s2",
            "experiment_id": "1",
            "status": "FAILED",
            "variant": "baseline",
            "sample.mjp.variant": "A",
            "sample.runtime.seed": 2,
            "val/top1": 0.1,
        }
    )
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
    assert "J-s1: no consistency (%) (not logged)" in notes
    assert "A-s2: failed, left out of the table" in notes
    runs["val/top1_shuffled_0.9"] = None
    assert "top-1 @ shuffle 0.9 (%)" not in study_table(runs) or set(study_table(runs)["top-1 @ shuffle 0.9 (%)"]) == {""}


def test_the_paper_beside_ours_for_table_4():
    side = paper_comparison(runs_frame(), "4")
    assert list(side["paper row"]) == ["A", "J (γ=0.03)"]  # the paper's J trained at 0.03: the label says so
    assert list(side["top-1: paper"]) == ["79.8", "80.5"] and list(side["top-1: ours"]) == ["81.0 ± 1.4", "83.0 ± 2.8"]
    assert list(side["consistency: paper"]) == ["64.3", "82.9"]


@pytest.mark.parametrize("table, row", [("4", "J"), ("1", "DeiT-S + MJP")])
def test_j_at_another_ratio_is_compared_with_table_3_at_that_ratio(table, row):
    """Tables 1 and 4 print the paper's gamma = 0.03 run (Table 3's 0.03 column); ours at 0.27 is set
    beside Table 3's 0.27 column (80.3 / 3.97 / 93.1), and says so."""
    runs = runs_frame().assign(**{"mjp.mask_ratio": 0.27})
    side = paper_comparison(runs, table)
    assert list(side["paper row"]) == ["DeiT-S" if table == "1" else "A", f"{row} (Table 3, γ=0.27)"]
    assert list(side["top-1: paper"]) == ["79.8", "80.3"] and list(side["consistency: paper"]) == ["64.3", "93.1"]
    # At the paper's own ratio, or at one Table 3 does not have, the row is the table's own, labelled with its ratio.
    for ratio in (0.03, 0.5):
        side = paper_comparison(runs_frame().assign(**{"mjp.mask_ratio": ratio}), table)
        assert list(side["paper row"])[1] == f"{row} (γ=0.03)" and list(side["top-1: paper"])[1] == "80.5"


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


def test_tidy_renames_mlflow_columns_and_parses_params():
    raw = pd.DataFrame(
        {
            "run_id": ["r"],
            "experiment_id": ["1"],
            "status": ["FINISHED"],
            "start_time": [0],
            "params.mjp.mask_ratio": ["0.27"],
            "params.mjp.dal": ["mlp"],
            "metrics.val/top1": [0.5],
            "tags.mjp.variant": ["jp"],
            "tags.mjp.sample.mjp.variant": ["E"],
        }
    )
    runs = tidy(raw)
    assert runs.loc[0, "mjp.mask_ratio"] == 0.27 and runs.loc[0, "mjp.dal"] == "mlp"
    assert runs.loc[0, "val/top1"] == 0.5 and runs.loc[0, "variant"] == "jp" and runs.loc[0, "sample.mjp.variant"] == "E"


def robustness_runs():
    """Two seeds of a baseline and of J with corruption errors and PE metrics; J's errors are
    half the baseline's."""
    from mjp import keys

    rows = []
    for sample, variant, scale in (("A", "baseline", 1.0), ("J", "jp_unk_dal_mlp", 0.5)):
        for seed in (0, 1):
            row = {
                "run_id": f"{sample}{seed}",
                "run_name": f"{sample}-s{seed}",
                "experiment_id": "1",
                "status": "FINISHED",
                "variant": variant,
                "sample.mjp.variant": sample,
                "sample.runtime.seed": seed,
                "val/top1": 0.8,
            }
            row.update({keys.robust_err_key(c): scale * (0.4 + 0.02 * i) for i, c in enumerate(keys.CORRUPTIONS)})
            row.update({keys.ROBUST_MCE_UNNORMALIZED: scale * 0.54, keys.PE_MAE_2D: 0.1})
            row.update({keys.pe_ev_key(k): min(1.0, (0.3 if sample == "A" else 0.2) * k) for k in keys.PE_EV_DIMS})
            rows.append(row)
    return pd.DataFrame(rows)


def test_mce_relative_to_the_baseline_is_100_for_it_and_scales_with_the_errors():
    from analysis.robustness import with_relative_mce
    from mjp import keys

    runs = with_relative_mce(robustness_runs())
    assert runs[keys.ROBUST_MCE_RELATIVE].tolist() == pytest.approx([100, 100, 50, 50])
    table = study_table(runs)
    assert list(table["mCE (vs baseline, %)"]) == ["100.0 ± 0.0", "50.0 ± 0.0"]
    assert list(table["mean corruption error (%)"]) == ["54.0 ± 0.0", "27.0 ± 0.0"]


def test_without_a_baseline_there_is_no_relative_mce():
    from analysis.robustness import with_relative_mce
    from mjp import keys

    runs = robustness_runs()
    only_j = with_relative_mce(runs[runs.variant != "baseline"])
    assert keys.ROBUST_MCE_RELATIVE not in only_j.columns


def test_robustness_and_pe_tables_and_the_paper_s_tables_6_and_s4(tmp_path):
    from analysis.tables import PE, ROBUSTNESS

    runs = robustness_runs()
    robust = study_table(runs, metrics=ROBUSTNESS)
    assert list(robust["gaussian noise"]) == ["40.0 ± 0.0", "20.0 ± 0.0"]
    assert "A: top-1 (%)" not in robust.columns  # nobody logged ImageNet-A
    pe = study_table(runs, metrics=PE)
    assert list(pe["EV@3 (%)"]) == ["90.0 ± 0.0", "60.0 ± 0.0"]
    six = paper_comparison(runs, "6")
    assert list(six["EV@3: ours"]) == ["90.0 ± 0.0", "60.0 ± 0.0"] and list(six["EV@3: paper"]) == ["54.61", "46.74"]
    s4 = paper_comparison(runs, "s4")
    noise = s4.set_index("metric").loc["gaussian noise"]  # many metrics: a row per metric
    assert list(noise) == ["40.0 ± 0.0", "41", "20.0 ± 0.0", "39.9"]
    assert list(s4.columns) == ["metric", "A: baseline (n=2)", "paper: DeiT-S", "J: JP + UNK + DAL (NLN) (n=2)", "paper: DeiT-S + MJP"]
    files = write_report(runs, tmp_path, ReportContext(study="s", title="t", paper_tables=("6",)))
    assert set(files.sections) == {"robustness", "pe"}
    assert (tmp_path / "robustness_table.md").is_file() and (tmp_path / "figures" / "corruption_errors.png").is_file()
    assert (tmp_path / "figures" / "pe_explained_variance.png").is_file()
    html = files.html.read_text()
    assert "Robustness (Table 2, supplementary Table 4)" in html and "below 100 is more robust" in html


def test_supplementary_table_4_compares_the_mean_over_its_own_ten_corruptions():
    """Like with like: the paper's mCE column averages 10 corruptions; ours beside it too, not our 15."""
    import pandas as pd

    from analysis.paper import CORRUPTIONS_S4
    from analysis.robustness import with_s4_mean_error
    from analysis.tables import paper_comparison
    from mjp import keys

    errors = {keys.robust_err_key(c): 0.2 for c in keys.CORRUPTIONS}
    errors.update({keys.robust_err_key(c): 0.4 for c in CORRUPTIONS_S4})  # 10 at 40%, the other 5 at 20%
    runs = pd.DataFrame(
        [
            {
                "run_id": "r1",
                "status": "FINISHED",
                "variant": "baseline",
                "sample.mjp.variant": "A",
                **errors,
                keys.ROBUST_MCE_UNNORMALIZED: sum(errors.values()) / 15,
            }
        ]
    )
    table = paper_comparison(with_s4_mean_error(runs), "s4")
    row = table[table["metric"] == "mean (paper: its mCE)"].iloc[0]
    assert row.iloc[1] == "40.0" and row.iloc[2] == "44"  # ours over the same 10 corruptions, the paper's DeiT-S


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


def test_a_fraction_shows_as_a_percentage_and_a_missing_value_as_a_dash():
    from analysis.markdown import format_value

    assert format_value(keys.VAL_TOP1, 0.9725) == "97.2%" and format_value(keys.VAL_DIFF_NORM, 4.951) == "4.95"
    assert format_value(keys.VAL_TOP1, None) == "-" and format_value(keys.VAL_TOP1, float("nan")) == "-"


def test_sampled_values_are_rounded_and_one_not_sampled_is_a_dash_never_nan():
    """``tune``: a continuous masking ratio, and a DAL weight sampled only with a DAL head."""
    rows = [
        {
            "run_id": str(i),
            "status": "FINISHED",
            "variant": "custom",
            "sample.mjp.mask_ratio": ratio,
            "sample.mjp.dal": dal,
            "sample.mjp.dal_weight": weight,
            "sample.runtime.seed": 0,
            "val/top1": 0.5 + i / 10,
        }
        for i, (ratio, dal, weight) in enumerate([(0.18734219, "none", float("nan")), (0.4123456, "mlp", 0.0123456789)])
    ]
    table = study_table(pd.DataFrame(rows))
    assert set(zip(table["mjp.mask_ratio"], table["mjp.dal_weight"])) == {("0.187", "-"), ("0.412", "0.0123")}
    assert "nan" not in to_markdown(table)


def test_supplementary_table_4_of_a_smoke_sweep_shows_what_it_measured_and_says_what_it_lacks():
    """`sweep run fashion --smoke` measures 3 corruptions: its table had 8 of 10 rows empty and an
    empty mean under a note that said "ours is the mean over these 10 corruptions"."""
    import pandas as pd

    from analysis.robustness import with_s4_mean_error
    from analysis.tables import paper_text
    from mjp import keys

    smoke = ("gaussian_noise", "fog", "pixelate")  # sweep/studies/fashion.yaml's smoke corruptions
    runs = pd.DataFrame(
        [
            {
                "run_id": "r1",
                "status": "FINISHED",
                "variant": "baseline",
                "sample.mjp.variant": "A",
                **{keys.robust_err_key(c): 0.3 for c in smoke},
            }
        ]
    )
    table = paper_comparison(with_s4_mean_error(runs), "s4")
    assert list(table["metric"]) == ["gaussian noise", "pixelate"]  # fog is not one of the table's 10
    assert all(table.iloc[:, 1] == "30.0")
    text = paper_text("s4", table)
    assert "mean over these 10" not in text and "| mean" not in text
    assert "note: ours has no shot noise, impulse noise" in text and "mean (paper: its mCE): not measured by this study's runs" in text
    assert "its printed mCE" in text  # the paper's own note stays

    every = {keys.robust_err_key(c): 0.4 for c in keys.CORRUPTIONS}
    full = paper_comparison(with_s4_mean_error(runs.assign(**every)), "s4")
    assert len(full) == 11 and "note: ours is the mean over these 10 corruptions" in paper_text("s4", full)
    assert "ours has no" not in paper_text("s4", full)
