"""``mjp analyze``: paper-shaped tables, figures, reports and results files from MLflow."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_uri, group


def add(sub: argparse._SubParsersAction) -> None:
    analyze = group(sub, "analyze", "paper-shaped tables, figures and reports from MLflow")
    for name, helptext in (  # one handler: `tables` is the report with the table files named at the end
        ("tables", "tables (Markdown, CSV, LaTeX) and figures of a study's latest sweep"),
        ("report", "one self-contained HTML report of a study's latest sweep (tables, figures, paper, links)"),
    ):
        p = analyze.add_parser(name, help=helptext)
        p.add_argument("--study", required=True, help="the study's name (its MLflow sweeps; `mjp sweep status` lists them)")
        p.add_argument("--all", action="store_true", help="pool every sweep of the study, not only the latest")
        p.add_argument("--paper", action="store_true", help="print the paper's numbers beside ours for the same rows")
        add_uri(p)
        p.add_argument("--out", help="the report goes to OUT/<study> (default OUT: $MJP_REPORTS_DIR, else ./reports)")
        p.set_defaults(handler="sweep.commands.analyze:cmd_analyze")
    results = analyze.add_parser(
        "results",
        help="write results/<study>.json from the study's latest sweep "
        "(the results tables of README.md and docs/ are made from these files)",
    )
    results.add_argument("--study", required=True, help="a study name (its newest sweep in MLflow is read)")
    results.add_argument(
        "--command",
        help="the command that ran the sweep, as the results table should say "
        "(default: the one the sweep recorded, e.g. `mjp demo`; else `mjp sweep run <study>`)",
    )
    add_uri(results)
    results.set_defaults(handler="sweep.commands.results:cmd_analyze_results")
    readme = analyze.add_parser("readme", help="render the results tables of README.md and docs/*.md from results/*.json")
    readme.add_argument("--check", action="store_true", help="change nothing; exit 1 when README.md or docs/ disagrees with results/")
    readme.set_defaults(handler="sweep.commands.results:cmd_analyze_readme")
