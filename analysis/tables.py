"""Paper-shaped tables from the tidy runs frame: one row per configuration, mean ± std over its
seeds (with n; no ± where n = 1), deltas against the study's baseline, and the paper's numbers
beside ours for the rows the paper has.

Accuracies and consistency are fractions in MLflow and percentages here, as in the paper.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.markdown import is_fraction, markdown_table
from analysis.paper import TABLES, measured_titles, paper_notes, paper_row, paper_values
from mjp import keys
from mjp.config import table4_row

#: (metric key, column title) of the main table, in order; a column appears when a run logged it
MAIN: tuple[tuple[str, str], ...] = (
    (keys.VAL_TOP1, "top-1 (%)"),
    (keys.VAL_CONSISTENCY, "consistency (%)"),
    (keys.VAL_DIFF_NORM, "Diff. Norm"),
    (keys.top1_shuffled_key(0.9), "top-1 @ shuffle 0.9 (%)"),
    (keys.ROBUST_MCE, "mCE (AlexNet-normalised)"),
    (keys.ROBUST_MCE_RELATIVE, "mCE (vs baseline, %)"),
    (keys.ROBUST_MCE_UNNORMALIZED, "mean corruption error (%)"),
    (keys.pe_ev_key(3), "PE EV@3 (%)"),
    (keys.PE_MAE_2D, "PE 2-D MAE"),
)
#: the robustness table (supplementary Table 4): error per corruption (mean of 5 severities) and mCE
ROBUSTNESS: tuple[tuple[str, str], ...] = (
    (keys.ROBUST_CLEAN_ERR, "clean error (%)"),
    *((keys.robust_err_key(c), c.replace("_", " ")) for c in keys.CORRUPTIONS),
    (keys.ROBUST_MCE_UNNORMALIZED, "mean corruption error (%)"),
    (keys.ROBUST_MCE_RELATIVE, "mCE (vs baseline, %)"),
    (keys.ROBUST_MCE, "mCE (AlexNet-normalised)"),
    (keys.ROBUST_IMAGENET_A_TOP1, "A: top-1 (%)"),
    (keys.ROBUST_IMAGENET_A_AURRA, "A: AURRA (%)"),
    (keys.ROBUST_IMAGENET_O_AUPR, "O: AUPR (%)"),
    (keys.ROBUST_IMAGENET_R_TOP1, "R: top-1 (%)"),
)
#: the position-embedding table (Table 6, supplementary Table 2)
PE: tuple[tuple[str, str], ...] = (
    *((keys.pe_ev_key(k), f"EV@{k} (%)") for k in keys.PE_EV_DIMS),
    (keys.PE_MAE_1D, "1-D MAE"),
    (keys.PE_MAE_2D, "2-D MAE"),
)
#: paper tables with more metrics than this are laid out a row per metric
WIDE = 6
#: metrics whose deltas against the baseline are shown
DELTAS = (keys.VAL_TOP1, keys.VAL_CONSISTENCY, keys.VAL_DIFF_NORM)


def privacy_metrics(runs: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """PSNR and SSIM of each privacy setting the runs logged (``privacy/<s>_<m>``)."""
    found = sorted(c for c in runs.columns if c.startswith("privacy/") and c.endswith(("_psnr", "_ssim")))
    return tuple((c, f"({c[len('privacy/')]}) {c.rsplit('_', 1)[1].upper()}") for c in found)


def table_metrics(runs: pd.DataFrame, metrics: tuple[tuple[str, str], ...] | None = None) -> tuple[tuple[str, str], ...]:
    """(key, title) of ``metrics`` (default: the main table's, with privacy) that the runs logged."""
    if metrics is not None:
        return tuple((k, t) for k, t in metrics if k in runs.columns and runs[k].notna().any())
    return tuple((k, t) for k, t in MAIN if k in runs.columns) + privacy_metrics(runs)


def group_columns(runs: pd.DataFrame) -> list[str]:
    """What a sweep varied (its sampled keys, seeds excluded; the variant first, then by name, so
    labels read the same whatever order MLflow returns columns in); ``variant`` when nothing was sampled."""
    sampled = [c for c in runs.columns if c.startswith("sample.") and c != "sample.runtime.seed" and runs[c].notna().any()]
    return sorted(sampled, key=lambda c: (c != "sample.mjp.variant", c)) or ["variant"]


def variant_title(name: object) -> str:
    """``jp_unk_dal_mlp`` (or ``J``) -> ``J: JP + UNK + DAL (NLN)``."""
    try:
        row = table4_row(name)
    except ValueError:
        return str(name)
    return f"{row.letter}: {row.title}"


def label(column: str, value: object) -> str:
    """A row's value of what the sweep varied: a Table 4 row by its title, a number to three
    significant digits (as run names give it), ``-`` where the trial did not sample it (a DAL
    weight without a DAL head)."""
    if column in ("variant", "sample.mjp.variant"):
        return variant_title(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def finished(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "FINISHED"] if "status" in runs else runs


def aggregate(runs: pd.DataFrame, by: list[str], metrics: tuple[tuple[str, str], ...] | None = None) -> pd.DataFrame:
    """Mean, std and count of every table metric per group of finished runs."""
    done = finished(runs)
    columns = [k for k, _ in table_metrics(done, metrics)]
    if done.empty or not columns:
        return pd.DataFrame()
    grouped = done.groupby(by, dropna=False, sort=True)
    agg = grouped[columns].agg(["mean", "std", "count"])
    agg[("n", "")] = grouped.size()
    if "variant" in done.columns and "variant" not in by:
        agg[("variant", "")] = grouped["variant"].first()
    return agg


#: values already in percent (mCE), printed like the percentages
PERCENT_VALUES = (keys.ROBUST_MCE, keys.ROBUST_MCE_RELATIVE)


def cell(row: pd.Series, key: str) -> str:
    """The formatted mean ± std (n) of ``key`` in a row of ``aggregate``."""
    return format_cell(
        row[(key, "mean")], row[(key, "std")], int(row[(key, "count")]), is_fraction(key), 1 if key in PERCENT_VALUES else None
    )


def format_cell(mean: float | None, std: float | None = None, n: int = 1, percent: bool = False, digits: int | None = None) -> str:
    """``81.0 ± 1.4`` over n > 1 runs, ``81.0`` for one, ``""`` when missing (a note says why)."""
    if mean is None or pd.isna(mean):
        return ""
    scale, digits = (100, 1) if percent else (1, digits or (2 if abs(mean) < 100 else 1))
    text = f"{scale * mean:.{digits}f}"
    return text + (f" ± {scale * std:.{digits}f}" if n > 1 and std is not None and not pd.isna(std) else "")


def baseline_row(agg: pd.DataFrame, by: list[str]) -> object | None:
    """The index of the study's baseline: Table 4's row A, or masking ratio 0, when there is exactly one."""
    if ("variant", "") in agg.columns:
        rows = agg.index[agg[("variant", "")] == "baseline"]
    elif "variant" in by:
        rows = [i for i in agg.index if (i if not isinstance(i, tuple) else i[by.index("variant")]) == "baseline"]
    elif "sample.mjp.mask_ratio" in by and len(by) == 1:
        rows = [i for i in agg.index if i == 0]
    else:
        return None
    return rows[0] if len(rows) == 1 else None


def study_table(runs: pd.DataFrame, by: list[str] | None = None, metrics: tuple[tuple[str, str], ...] | None = None) -> pd.DataFrame:
    """Strings ready to print: one row per configuration, the paper's metrics (or ``metrics``:
    ``ROBUSTNESS``, ``PE``) as columns."""
    by = by or group_columns(runs)
    agg = aggregate(runs, by, metrics)
    if agg.empty:
        return pd.DataFrame()
    base = baseline_row(agg, by)
    rows = []
    for index, row in agg.iterrows():
        values = index if isinstance(index, tuple) else (index,)
        out = {col.removeprefix("sample."): label(col, v) for col, v in zip(by, values)}
        n = int(row[("n", "")])
        for key, title in table_metrics(finished(runs), metrics):
            count = int(row[(key, "count")])
            out[title] = cell(row, key)
            if key in DELTAS and base is not None:
                delta = row[(key, "mean")] - agg.loc[base, (key, "mean")]
                scale, digits = (100, 1) if is_fraction(key) else (1, 2)
                out[f"Δ {title.split(' (')[0]}"] = "" if index == base or not count else f"{scale * delta:+.{digits}f}"
        out["n"] = str(n)
        rows.append(out)
    return pd.DataFrame(rows).fillna("")


def missing_notes(runs: pd.DataFrame, by: list[str] | None = None) -> list[str]:
    """One line per set of finished runs that lack the same metrics the table shows for others
    (``A-s0, E-s0: no PE EV@3 (%), PE 2-D MAE (not logged)``), and one per run that did not finish."""
    done = finished(runs)
    lacking: dict[tuple[str, ...], list[str]] = {}
    metrics = table_metrics(done)
    for _, row in done.iterrows():
        titles = tuple(title for key, title in metrics if pd.isna(row[key]))
        if titles:
            lacking.setdefault(titles, []).append(row.get("run_name") or row["run_id"][:8])
    notes = [f"{', '.join(names)}: no {', '.join(titles)} (not logged)" for titles, names in lacking.items()]
    not_done = runs[runs["status"] != "FINISHED"] if "status" in runs else runs.iloc[0:0]
    notes += [f"{getattr(r, 'run_name', None) or r.run_id[:8]}: {r.status.lower()}, left out of the table" for r in not_done.itertuples()]
    return notes


def paper_comparison(runs: pd.DataFrame, table_key: str, by: list[str] | None = None) -> pd.DataFrame:
    """Our rows that answer to a row of the paper's table ``table_key``, ours beside the paper's.

    Up to ``WIDE`` metrics: a row per configuration, "ours" and "paper" columns per metric. More
    (supplementary Table 4's corruptions): a row per metric ours has, "ours" and "paper" columns
    per configuration, so the table stays readable (``paper_notes`` names the metrics left out).
    """
    paper = TABLES[table_key]
    by = by or group_columns(runs)
    agg = aggregate(runs, by, tuple(paper.columns.items()))
    ratio = training_ratio(runs)
    pairs = []  # (our label, paper row, {metric title: (ours, theirs)}, n)
    for index, row in agg.iterrows() if not agg.empty else []:
        values = index if isinstance(index, tuple) else (index,)
        group = dict(zip(by, values))
        if ("variant", "") in agg.columns:
            group.setdefault("variant", row[("variant", "")])
        target = paper_row(table_key, group)
        if target is None or target not in paper.rows:
            continue
        cells = {}
        shown, theirs_row = paper_values(table_key, target, ratio)
        for key, title in paper.columns.items():
            theirs = theirs_row.get(key)
            cells[title] = (cell(row, key) if (key, "mean") in agg.columns else "", "" if theirs is None else f"{theirs:g}")
        pairs.append((", ".join(label(c, v) for c, v in zip(by, values)), shown, cells, str(int(row[("n", "")]))))
    if len(paper.columns) <= WIDE:
        return pd.DataFrame(
            [
                {
                    "ours": ours,
                    "paper row": target,
                    **{f"{t}: {side}": v for t, (a, b) in cells.items() for side, v in (("ours", a), ("paper", b))},
                    "n": n,
                }
                for ours, target, cells, n in pairs
            ]
        )
    rows = []
    for title in (t for t in paper.columns.values() if any(cells[t][0] for _, _, cells, _ in pairs)):  # a metric ours has
        out = {"metric": title}
        for ours, target, cells, n in pairs:
            out[f"{ours} (n={n})"], out[f"paper: {target}"] = cells[title]
        rows.append(out)
    return pd.DataFrame(rows) if pairs else pd.DataFrame()


def training_ratio(runs: pd.DataFrame) -> float | None:
    """The one masking ratio the finished runs trained at (``mjp.mask_ratio``), or None when they
    trained at several or did not record it."""
    done = finished(runs)
    ratios = set(done["mjp.mask_ratio"].dropna().astype(float)) if "mjp.mask_ratio" in done else set()
    return ratios.pop() if len(ratios) == 1 else None


#: what the paper's numbers were measured on (every table of ``analysis.paper``)
PAPER_SETUP = "DeiT-S on ImageNet-1K (224 px, 14x14 patches), 300 epochs"


def setup_caption(runs: pd.DataFrame) -> str:
    """What our finished runs were measured on: ``digits, vit_tiny_patch16_224 (D=64, depth 4,
    patch 2), 30 epochs, seeds 0, 1, 2`` (what a reader needs beside the paper's setup)."""
    done = finished(runs)

    def values(column: str) -> list[str]:
        return sorted({str(v) for v in done[column].dropna()}) if column in done else []

    shape = ", ".join(
        f"{name}{'/'.join(values(col))}"
        for col, name in (("model.kwargs.embed_dim", "D="), ("model.kwargs.depth", "depth "), ("model.kwargs.patch_size", "patch "))
        if values(col)
    )
    parts = ["/".join(values("data.name")), "/".join(values("model.name")) + (f" ({shape})" if shape else "")]
    parts += [f"{'/'.join(values('optim.epochs'))} epochs"] if values("optim.epochs") else []
    seeds = sorted({int(v) for v in done["runtime.seed"].dropna()}) if "runtime.seed" in done else []
    parts += [f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"] if seeds else []
    ratio = training_ratio(runs)
    parts += [f"rows that shuffle trained at gamma = {ratio:g}"] if ratio is not None else []
    return ", ".join(p for p in parts if p)


def paper_text(table_key: str, table: pd.DataFrame, ours: str = "") -> str:
    """The paper's table beside ours as console / Markdown text: its title, both setups (``ours``:
    ``setup_caption``), its note."""
    paper = TABLES[table_key]
    body = to_markdown(table) if len(table) else "(no run of this study answers to a row of this table with its metrics)"
    setups = f"the paper: {PAPER_SETUP}" + (f"; ours: {ours}" if ours else "")
    return f"{paper.title}; {setups}\n{body}" + "".join(f"\nnote: {n}" for n in paper_notes(table_key, measured_titles(table)))


def to_markdown(table: pd.DataFrame) -> str:
    return markdown_table([str(c) for c in table.columns], table.itertuples(index=False))


def to_latex(table: pd.DataFrame, caption: str) -> str:
    def esc(text: object) -> str:
        return str(text).replace("%", r"\%").replace("_", r"\_").replace("±", r"$\pm$").replace("Δ", r"$\Delta$").replace("@", "at")

    cols = "l" + "r" * (len(table.columns) - 1)
    body = [" & ".join(esc(c) for c in table.columns) + r" \\ \midrule"]
    body += [" & ".join(esc(v) for v in row) + r" \\" for row in table.itertuples(index=False)]
    return "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            f"\\caption{{{esc(caption)}}}",
            f"\\begin{{tabular}}{{{cols}}}",
            r"\toprule",
            *body,
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
        ]
    )
