"""One self-contained HTML page: inline style, tables as HTML, figures as base64 PNGs (no
external file, so the report can be mailed, attached to an MLflow run or opened offline)."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable
from typing import Any

import pandas as pd

STYLE = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
  padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.meta { color: #555; font-size: 0.9em; } .note { color: #666; font-size: 0.85em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; } th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; } figcaption { color: #555; font-size: 0.85em; }
.scroll { overflow-x: auto; } .row { display: flex; flex-wrap: wrap; gap: 0.8em; align-items: flex-start; }
.row figure { margin: 0.4em 0; max-width: 32%; } .row figure img { width: 100%; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
"""


def table_html(table: pd.DataFrame, table_id: str, links: dict[str, str] | None = None) -> str:
    """A DataFrame as an HTML table; ``links`` maps a first-column value to a URL."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    rows = []
    for row in table.itertuples(index=False):
        cells = []
        for i, value in enumerate(row):
            text = html.escape(str(value))
            if i == 0 and links and str(value) in links:
                text = f'<a href="{html.escape(links[str(value)])}">{text}</a>'
            cells.append(f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    table = f'<table id="{html.escape(table_id)}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<div class="scroll">{table}</div>'


def figure_html(figure: Any, alt: str, caption: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return image_html(buffer.getvalue(), alt, caption)


def image_html(png: bytes, alt: str, caption: str) -> str:
    """A PNG file's bytes (e.g. a figure a run logged to MLflow) inline."""
    data = base64.b64encode(png).decode()
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}"><figcaption>{html.escape(caption)}</figcaption></figure>'
    )


def figure_row(figures: Iterable[str]) -> str:
    """Rendered figures side by side (up to three per line)."""
    return f'<div class="row">{"".join(figures)}</div>'


def page(title: str, meta: Iterable[str], sections: Iterable[tuple[str, str]]) -> str:
    """``sections``: (heading, already-rendered HTML)."""
    body = [f"<h1>{html.escape(title)}</h1>", *[f'<p class="meta">{m}</p>' for m in meta]]
    body += [f"<h2>{html.escape(heading)}</h2>{content}" for heading, content in sections if content]
    head = f'<meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style>'
    return f'<!doctype html><html lang="en"><head>{head}</head><body>{"".join(body)}</body></html>\n'


def paragraphs(lines: Iterable[str], css: str = "note") -> str:
    return "".join(f'<p class="{css}">{html.escape(line)}</p>' for line in lines)


def preformatted(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"
