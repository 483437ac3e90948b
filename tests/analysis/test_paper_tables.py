"""The paper's tables beside ours: which paper row each of ours is set beside (Table 4's, or Table 3's
at our masking ratio), and supplementary Table 4 compared like with like, saying what ours lacks."""

import pytest

from analysis.tables import paper_comparison
from tests.analysis.runs_made import runs_frame


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
