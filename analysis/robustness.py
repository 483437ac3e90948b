"""mCE relative to the study's baseline, for data that is not ImageNet (no AlexNet reference), and
the mean error over supplementary Table 4's 10 corruptions, to set beside that table's mean.

Each run's corruption errors ``robust/<c>_err`` (means over the 5 severities) are divided by the
baseline's (the mean over the finished runs of Table 4's row A), averaged over the corruptions
both have and given in percent: ``mjp.robustness.mce`` with the baseline as its reference (a
mean over severities divides the same way). The baseline itself scores about 100.
"""

from __future__ import annotations

import pandas as pd

from analysis.tables import finished
from mjp import keys


def corruption_columns(runs: pd.DataFrame) -> list[str]:
    """The ``robust/<c>_err`` columns the runs logged, in the benchmark's order."""
    return [
        keys.robust_err_key(c)
        for c in keys.CORRUPTIONS
        if keys.robust_err_key(c) in runs.columns and runs[keys.robust_err_key(c)].notna().any()
    ]


def with_s4_mean_error(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``analysis.paper.MEAN_ERROR_S4`` where a run has all 10 of the table's corruption errors."""
    from analysis.paper import CORRUPTIONS_S4, MEAN_ERROR_S4

    columns = [keys.robust_err_key(c) for c in CORRUPTIONS_S4]
    if not all(c in runs.columns for c in columns):
        return runs
    out = runs.copy()
    out[MEAN_ERROR_S4] = runs[columns].mean(axis=1, skipna=False)
    return out


def with_relative_mce(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``robust/mce_relative`` filled where a run and the baseline have corruption errors."""
    from mjp.robustness import mce

    columns = corruption_columns(runs)
    if not columns or "variant" not in runs.columns:
        return runs
    base = finished(runs)
    base = base[base["variant"] == "baseline"][columns].mean()
    present = [c for c in columns if pd.notna(base[c]) and base[c] > 0]
    if not present:
        return runs
    reference = {c: [base[c]] * 5 for c in present}
    out = runs.copy()
    out[keys.ROBUST_MCE_RELATIVE] = [
        mce({c: [row[c]] * 5 for c in present}, baseline=reference) if all(pd.notna(row[c]) for c in present) else float("nan")
        for _, row in runs.iterrows()
    ]
    return out
