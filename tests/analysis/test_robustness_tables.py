"""The robustness and PE tables: mCE relative to the baseline, corruption errors, explained
variance, the paper's Tables 6 and S4 beside them, and their sections of the report."""

import pandas as pd
import pytest

from analysis.report import ReportContext, write_report
from analysis.tables import paper_comparison, study_table


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
