"""Paper-shaped tables from the tidy runs frame: mean (± std over seeds) per configuration.

Accuracies and consistency are stored as fractions and printed as percentages, as in the paper;
``Δ top-1`` is against the baseline row when the table has one (Table 4's "(+0.7)").
"""

from __future__ import annotations

import pandas as pd

from analysis.markdown import markdown_table
from mjp import keys
from mjp.config import TABLE4_NAMES

#: (metric key, column title, shown as percent)
PAPER_METRICS: tuple[tuple[str, str, bool], ...] = (
    (keys.VAL_TOP1, "top-1 (%)", True),
    (keys.VAL_CONSISTENCY, "consistency (%)", True),
    (keys.VAL_DIFF_NORM, "Diff. Norm", False),
    (keys.top1_shuffled_key(0.9), "top-1 @ shuffle 0.9 (%)", True),
)
LETTER = {name: letter for letter, name in TABLE4_NAMES.items()}


def privacy_metrics(runs: pd.DataFrame) -> tuple[tuple[str, str, bool], ...]:
    """PSNR and SSIM columns of the privacy settings the runs logged (``privacy/<s>_<m>``)."""
    found = sorted(c for c in runs.columns if c.startswith("privacy/") and c.endswith(("_psnr", "_ssim")))
    return tuple((c, f"({c[8]}) {c.rsplit('_', 1)[1].upper()}", False) for c in found)


def group_columns(runs: pd.DataFrame) -> list[str]:
    """What a sweep varied (its sampled keys, seeds excluded); ``variant`` when nothing was sampled."""
    sampled = [c for c in runs.columns if c.startswith("sample.") and c != "sample.runtime.seed" and runs[c].notna().any()]
    return sampled or ["variant"]


def table_metrics(runs: pd.DataFrame) -> tuple[tuple[str, str, bool], ...]:
    return PAPER_METRICS + privacy_metrics(runs)


def aggregate(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean, std and count of every paper metric per group of finished runs."""
    done = runs[runs["status"] == "FINISHED"]
    metrics = [k for k, _, _ in table_metrics(done) if k in done.columns]
    if done.empty or not metrics:
        return pd.DataFrame()
    grouped = done.groupby(by, dropna=False, sort=True)
    agg = grouped[metrics].agg(["mean", "std"])
    agg[("n", "")] = grouped.size()
    if "variant" in done.columns and "variant" not in by:
        agg[("variant", "")] = grouped["variant"].first()
    return agg


def format_cell(mean: float, std: float = float("nan"), n: int = 1, percent: bool = False) -> str:
    """``81.0 ± 1.4`` (fractions as percentages); ``-`` when missing."""
    if mean is None or pd.isna(mean):
        return "-"
    scale = 100 if percent else 1
    digits = 1 if percent else 2
    text = f"{scale * mean:.{digits}f}"
    return text + (f" ± {scale * std:.{digits}f}" if n > 1 and not pd.isna(std) else "")


def _label(value: object, column: str) -> str:
    if column in ("variant", "sample.mjp.variant"):
        name = value if value in LETTER else {v: k for k, v in LETTER.items()}.get(value, value)
        letter = LETTER.get(name, TABLE4_NAMES.get(str(value), ""))
        return f"{letter}: {TABLE4_NAMES.get(str(value), name)}" if letter else str(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def paper_table(runs: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Strings ready to print: one row per configuration, the paper's metrics as columns."""
    by = by or group_columns(runs)
    agg = aggregate(runs, by)
    if agg.empty:
        return pd.DataFrame()
    rows = []
    baseline = None
    if ("variant", "") in agg.columns:  # a delta only against a single, unambiguous baseline row
        base = agg[agg[("variant", "")] == "baseline"]
        baseline = base[(keys.VAL_TOP1, "mean")].iloc[0] if len(base) == 1 else None
    for index, row in agg.iterrows():
        index = index if isinstance(index, tuple) else (index,)
        out = {col.removeprefix("sample."): _label(v, col) for col, v in zip(by, index)}
        n = int(row[("n", "")])
        for key, title, pct in table_metrics(runs):
            if (key, "mean") in agg.columns:
                out[title] = format_cell(row[(key, "mean")], row[(key, "std")], n, pct)
                if key == keys.VAL_TOP1 and baseline is not None:
                    out["Δ top-1"] = f"{100 * (row[(key, 'mean')] - baseline):+.1f}"
        out["runs"] = str(n)
        rows.append(out)
    return pd.DataFrame(rows)


def to_markdown(table: pd.DataFrame) -> str:
    return markdown_table([str(c) for c in table.columns], table.itertuples(index=False))


def to_latex(table: pd.DataFrame, caption: str) -> str:
    def esc(text: object) -> str:
        return str(text).replace("%", r"\%").replace("_", r"\_").replace("±", r"$\pm$").replace("Δ", r"$\Delta$").replace("@", "at")

    cols = "l" + "r" * (len(table.columns) - 1)
    body = [" & ".join(esc(c) for c in table.columns) + r" \\ \midrule"]
    body += [" & ".join(esc(v) for v in row) + r" \\" for row in table.itertuples(index=False)]
    return "\n".join([r"\begin{table}[t]", r"\centering", f"\\caption{{{esc(caption)}}}", f"\\begin{{tabular}}{{{cols}}}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}", r"\end{table}"])
