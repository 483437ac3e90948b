"""A study's table: seeds pooled into mean ± std and n, deltas to the baseline, missing values as
empty cells or dashes with a note, sampled values rounded; and MLflow's columns renamed for it."""

import pandas as pd

from analysis.runs import tidy
from analysis.tables import group_columns, missing_notes, study_table, to_markdown
from mjp import keys
from tests.analysis.runs_made import runs_frame


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
