"""A study's report on disk: tables (Markdown, CSV, LaTeX), figures (PNG and SVG), a Markdown
index and one self-contained HTML page with the study's description and config, its table, the
robustness and position-embedding tables where the runs logged them, the paper's numbers beside
ours, the best trial(s), the figures (and each configuration's PE figures as its run logged
them) and a link to every run in MLflow."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import figures as figs
from analysis.figures import evaluation as evaluation_figures
from analysis.html import figure_html, figure_row, image_html, page, paragraphs, preformatted, table_html
from analysis.markdown import format_value
from analysis.paper import TABLES, measured_titles, paper_notes
from analysis.robustness import with_relative_mce, with_s4_mean_error
from analysis.tables import (
    PAPER_SETUP,
    PE,
    ROBUSTNESS,
    finished,
    group_columns,
    missing_notes,
    paper_comparison,
    paper_text,
    setup_caption,
    study_table,
    to_latex,
    to_markdown,
)
from mjp import keys
from trainables.written import atomic_file, save_figure, write_atomically

#: figure file name -> (figure function's name, caption)
CAPTIONS = {
    "metrics": "This study's runs per configuration, in the paper's metrics (top-1, consistency, Diff. Norm).",
    "top1_vs_shuffle_ratio": "Top-1 accuracy when a growing share of the patches is shuffled at test time (the paper's Fig. 3).",
    "mask_ratio": "Consistency and Diff. Norm against the masking ratio used in training (Table 3).",
    "training_curves": "Validation top-1 and training loss per epoch.",
    "pareto": "Trade-off between accuracy and consistency (and attack PSNR): every trial, the Pareto front highlighted.",
    "optuna_history": "Optuna's optimisation history of the sweep.",
    "optuna_importances": "Optuna's parameter importances (fANOVA) for the objective.",
    "corruption_errors": "Error per corruption, mean of the 5 severities, and on the clean images they were made from.",
    "pe_explained_variance": "Explained variance of the position embedding at k PCA dimensions (Table 6).",
}
#: tables beside the main one: name -> (heading, metrics, what the reader must know)
SECTIONS = {
    "robustness": (
        "Robustness (Table 2, supplementary Table 4)",
        ROBUSTNESS,
        "Errors and the mean corruption error are unnormalised percentages (what the reference code prints). "
        "mCE (vs baseline) = 100 x mean over corruptions of this row's error / the baseline's (Table 4 row A): "
        "below 100 is more robust than the baseline. mCE (AlexNet-normalised), the robustness literature's "
        "convention, exists only for ImageNet-1K models evaluated on all 15 corruptions.",
    ),
    "pe": (
        "Position embeddings (Table 6, supplementary Table 2)",
        PE,
        "EV@k: share of the PE's variance in its top k principal components (Definition 1). MAE: 5-fold "
        "cross-validated linear regression from a PE row to its index (1-D) or to its row and column (2-D), in patches.",
    ),
}
#: figures a run logs under figures/pe/, shown per configuration in the report
PE_RUN_FIGURES = {
    "figures/pe/umap_2d.png": "UMAP 2-D of the PE rows, coloured by row and by column (Fig. 1/7)",
    "figures/pe/pca_3d.png": "PCA 3-D of the PE rows, coloured by row and by column (Fig. 1b)",
    "figures/pe/cosine_similarity.png": "cosine similarity of each position's PE to every other",
    "figures/pe/cls_attention.png": "last-layer CLS attention on the first validation images (Fig. 8)",
}


@dataclass
class ReportContext:
    """What the report says about the study beside its runs (all optional)."""

    study: str
    title: str
    description: str = ""
    study_yaml: str = ""
    paper_tables: tuple[str, ...] = ()
    best: str | None = None
    pareto_run_ids: set[str] = field(default_factory=set)
    optuna: tuple[str, str] | None = None  # (storage URL, study name)
    mlflow_ui: str = "http://127.0.0.1:5000"
    experiment_ids: dict[str, str] = field(default_factory=dict)  # run id -> experiment id
    histories: pd.DataFrame | None = None
    sweep_lines: tuple[str, ...] = ()
    run_figures: dict[str, dict[str, bytes]] = field(default_factory=dict)  # configuration -> {artifact path: PNG}


@dataclass
class ReportFiles:
    directory: Path
    html: Path
    markdown: Path
    table: pd.DataFrame
    paper: dict[str, pd.DataFrame]
    notes: list[str]
    sections: dict[str, pd.DataFrame] = field(default_factory=dict)  # SECTIONS' tables the runs logged
    setup: str = ""  # what the runs were measured on (``setup_caption``)


def build_figures(runs: pd.DataFrame, ctx: ReportContext) -> tuple[dict[str, Any], list[str]]:
    by = group_columns(runs)
    made = {
        "metrics": figs.metric_bars(runs, by),
        "top1_vs_shuffle_ratio": figs.shuffle_curves(runs, by),
        "mask_ratio": figs.mask_ratio_curves(runs),
        "training_curves": figs.training_curves(runs, ctx.histories, by) if ctx.histories is not None else None,
        "pareto": figs.pareto_plot(runs, ctx.pareto_run_ids),
        "corruption_errors": evaluation_figures.corruption_bars(runs, by),
        "pe_explained_variance": evaluation_figures.pe_variance_curves(runs, by),
    }
    out = {name: fig for name, fig in made.items() if fig is not None}
    notes: list[str] = []
    if ctx.optuna is not None:
        from analysis.figures.optuna_search import optuna_figures

        drawn, notes = optuna_figures(*ctx.optuna)
        out.update({name.removesuffix(".png"): fig for name, fig in drawn.items()})
    return out, notes


def _run_links(runs: pd.DataFrame, ctx: ReportContext) -> dict[str, str]:
    links = {}
    for r in runs.itertuples():
        exp = ctx.experiment_ids.get(r.run_id)
        if exp is not None:
            links[str(getattr(r, "run_name", None) or r.run_id)] = f"{ctx.mlflow_ui}/#/experiments/{exp}/runs/{r.run_id}"
    return links


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run: its name, state, and the headline metrics."""
    columns = [
        (k, t)
        for k, t in ((keys.VAL_TOP1, "top-1 (%)"), (keys.VAL_CONSISTENCY, "consistency (%)"), (keys.VAL_DIFF_NORM, "Diff. Norm"))
        if k in runs
    ]
    rows = []
    for r in runs.sort_values("run_name" if "run_name" in runs else "run_id").itertuples(index=False):
        d = r._asdict()
        row = {"run": d.get("run_name") or d["run_id"], "status": str(d.get("status", "")).lower()}
        row.update({t: format_value(k, runs.loc[runs.run_id == d["run_id"], k].iloc[0]).rstrip("%") for k, t in columns})
        if isinstance(d.get("error"), str) and d["error"]:
            row["error"] = d["error"][:120]
        rows.append(row)
    return without_empty_columns(pd.DataFrame(rows))


def without_empty_columns(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the columns that hold nothing (all NaN or blank), blanks for the other gaps."""
    empty = [c for c in table.columns if all(pd.isna(v) or (isinstance(v, str) and not v.strip()) for v in table[c])]
    return table.drop(columns=empty).fillna("")


def write_report(runs: pd.DataFrame, out_dir: str | Path, ctx: ReportContext) -> ReportFiles:
    out = Path(out_dir)
    for folder in (out, out / "figures"):  # folders the report makes: a link there is replaced, never written through
        if folder.is_symlink():
            folder.unlink()
        folder.mkdir(parents=True, exist_ok=True)
    runs = with_s4_mean_error(with_relative_mce(runs))
    table = without_empty_columns(study_table(runs))
    sections = {
        name: without_empty_columns(t) for name, (_, metrics, _) in SECTIONS.items() if len(t := study_table(runs, metrics=metrics))
    }
    notes = missing_notes(runs)
    paper = {k: paper_comparison(runs, k) for k in ctx.paper_tables}
    with atomic_file(out / "runs.csv") as csv:
        runs.to_csv(csv, index=False)
    captions = {
        "table": ctx.title,
        **{f"{k}_table": SECTIONS[k][0] for k in sections},
        **{f"paper_table_{k}": TABLES[k].title for k in paper},
    }
    for name, t in [
        ("table", table),
        *[(f"{k}_table", v) for k, v in sections.items()],
        *[(f"paper_table_{k}", v) for k, v in paper.items()],
    ]:
        with atomic_file(out / f"{name}.csv") as csv:
            t.to_csv(csv, index=False)
        write_atomically(out / f"{name}.md", to_markdown(t) + "\n")
        write_atomically(out / f"{name}.tex", to_latex(t, captions[name]) + "\n")
    drawn, figure_notes = build_figures(runs, ctx)
    for name, fig in drawn.items():
        for suffix in ("png", "svg"):
            save_figure(fig, out / "figures" / f"{name}.{suffix}", dpi=130, bbox_inches="tight")
    setup = setup_caption(runs)
    markdown = _markdown(ctx, table, sections, paper, notes + figure_notes, [f"{name}.png" for name in drawn], setup)
    write_atomically(out / "report.md", markdown)
    write_atomically(out / "report.html", _html(runs, ctx, table, sections, paper, notes + figure_notes, drawn))
    _close(drawn)
    return ReportFiles(out, out / "report.html", out / "report.md", table, paper, notes + figure_notes, sections, setup)


def _close(drawn: dict[str, Any]) -> None:
    import sys

    if "matplotlib.pyplot" in sys.modules:  # optuna's figures are pyplot's
        import matplotlib.pyplot as plt

        for fig in drawn.values():
            plt.close(fig)


def _markdown(
    ctx: ReportContext,
    table: pd.DataFrame,
    sections: dict[str, pd.DataFrame],
    paper: dict[str, pd.DataFrame],
    notes: list[str],
    figure_files: list[str],
    setup: str,
) -> str:
    lines = [
        f"# {ctx.title}",
        "",
        " ".join(ctx.description.split()),
        "",
        *ctx.sweep_lines,
        "",
        to_markdown(table) if len(table) else "no run finished",
        "",
    ]
    lines += [f"- {n}" for n in notes] + ([""] if notes else [])
    for name, t in sections.items():
        heading, _, note = SECTIONS[name]
        lines += [f"## {heading}", "", to_markdown(t), "", note, ""]
    for key, t in paper.items():
        lines += ["## " + paper_text(key, t, setup), ""]
    lines += [f"![{CAPTIONS.get(f.removesuffix('.png'), f)}](figures/{f})" for f in figure_files]
    return "\n".join(lines + ["", "Files: report.html (self-contained), table.{md,csv,tex}, runs.csv, figures/*.{png,svg}", ""])


def _html(
    runs: pd.DataFrame,
    ctx: ReportContext,
    table: pd.DataFrame,
    extra: dict[str, pd.DataFrame],
    paper: dict[str, pd.DataFrame],
    notes: list[str],
    drawn: dict[str, Any],
) -> str:
    sections = [("What this study measures", paragraphs([" ".join(ctx.description.split())], "body") if ctx.description else "")]
    results = table_html(table, "results") if len(table) else "<p>No run finished.</p>"
    sections.append(("Results", results + paragraphs(notes)))
    for name, t in extra.items():
        heading, _, note = SECTIONS[name]
        body = table_html(t, name) + paragraphs([note])
        if name == "pe":
            body += "".join(
                f"<h3>{html.escape(group)}</h3>"
                + figure_row(
                    image_html(png, f"{group}: {PE_RUN_FIGURES[path]}", f"{PE_RUN_FIGURES[path]} (one run of this configuration)")
                    for path, png in found.items()
                )
                for group, found in ctx.run_figures.items()
            )
        sections.append((heading, body))
    if ctx.best:
        done = finished(runs)
        single = len(done) > 0 and set(done.groupby(group_columns(runs), dropna=False).size()) == {1}
        caveat = (
            " One run per configuration: its lead over the others may be seed noise"
            " (a study with seeds: gives mean ± std and a paired test)."
        )
        sections.append(("Best trial", paragraphs([ctx.best + (caveat if single else "")], "body")))
    for key, t in paper.items():
        body = table_html(t, f"paper-{key}") if len(t) else "<p>No run of this study answers to a row of this table with its metrics.</p>"
        note = f"Ours: {setup_caption(runs)}; the paper: {PAPER_SETUP}. Compare directions, not values."
        sections.append((f"The paper beside ours — {TABLES[key].title}", body + paragraphs([note, *paper_notes(key, measured_titles(t))])))
    sections.append(
        ("Figures", "".join(figure_html(fig, CAPTIONS.get(name, name), CAPTIONS.get(name, name)) for name, fig in drawn.items()))
    )
    sections.append(("Every run (links open it in the MLflow UI)", table_html(runs_table(runs), "runs", _run_links(runs, ctx))))
    if ctx.study_yaml:
        sections.append(("The study", preformatted(ctx.study_yaml)))
    meta = [html.escape(line) for line in ctx.sweep_lines]
    return page(ctx.title, meta, sections)
