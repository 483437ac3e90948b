"""Results files: a sweep's finished runs as committed data, and the README tables made from them.

Every results table in README.md and docs/*.md comes from a file under ``results/`` and one command:

- ``mjp analyze results --study S`` reads the newest sweep of study S from MLflow and writes
  ``results/S.json``: each run's metrics and what it was measured on (data, model, epochs,
  seed), with the machine, the commit, the date and the command that made the sweep;
- ``mjp analyze readme`` renders each file's tables between ``<!-- results:S -->`` and
  ``<!-- /results:S -->`` in the one document that holds those markers (README.md or a page of
  docs/), with the same table code as ``mjp analyze tables``; ``--check`` (and a test) fails when
  a document and the files disagree.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.directions import directions_text
from analysis.robustness import with_relative_mce, with_s4_mean_error
from analysis.tables import finished, paper_comparison, paper_text, setup_caption, study_table, to_markdown
from trainables.written import write_atomically

FORMAT = 1
#: run columns kept besides the metrics (``<section>/<name>``): identity and what the run measured on
IDENTITY = (
    "run_id",
    "run_name",
    "status",
    "variant",
    "study",
    "trial_id",
    "runtime.seed",
    "data.name",
    "model.name",
    "optim.epochs",
    "mjp.mask_ratio",
)
IDENTITY_PREFIXES = ("sample.", "model.kwargs.")
METRIC_PREFIXES = ("val/", "robust/", "pe/", "privacy/")


@dataclass(frozen=True)
class Results:
    """One study's results file."""

    study: str
    command: str
    machine: str
    commit: str
    date: str
    paper_tables: tuple[str, ...]
    runs: tuple[dict[str, Any], ...]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.runs))


def _plain(value: Any) -> Any:
    """A JSON value: numpy scalars as Python ones, NaN as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


#: metric prefix -> the config section of the evaluation that logs it at the end of training
EVALUATIONS = {"robust/": "eval.robustness", "pe/": "eval.pe_analysis", "privacy/": "eval.privacy"}


def _configured(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value) not in ("", "None", "null")


def study_metrics(runs: pd.DataFrame) -> list[str]:
    """The metric columns the study measures: ``val/`` always, an evaluation's only where the runs
    were configured with it (its ``eval.*`` param). What ``mjp evaluate --run`` logged into a run
    later is not the study's and does not change the shape of its tables."""
    off = tuple(prefix for prefix, section in EVALUATIONS.items() if section in runs.columns and not runs[section].map(_configured).any())
    return (
        [c for c in runs.columns if c.startswith(METRIC_PREFIXES) and not c.startswith(off)]
        if off
        else [c for c in runs.columns if c.startswith(METRIC_PREFIXES)]
    )


def from_runs(
    runs: pd.DataFrame, *, study: str, command: str, machine: str, commit: str, date: str, paper_tables: tuple[str, ...]
) -> Results:
    """The finished runs of a sweep (the tidy frame of ``analysis.runs``) as a results file: their
    identity and the metrics of the evaluations the study runs (``study_metrics``)."""
    done = finished(runs)
    metrics = set(study_metrics(done))
    keep = [c for c in done.columns if c in IDENTITY or c.startswith(IDENTITY_PREFIXES) or c in metrics]
    done = done[keep].sort_values("run_name" if "run_name" in keep else "run_id")
    rows = tuple({k: _plain(v) for k, v in row.items() if _plain(v) is not None} for row in done.to_dict("records"))
    return Results(study, command, machine, commit, date, tuple(paper_tables), rows)


def save(results: Results, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "format": FORMAT,
        **{k: getattr(results, k) for k in ("study", "command", "machine", "commit", "date")},
        "paper_tables": list(results.paper_tables),
        "runs": list(results.runs),
    }
    write_atomically(path, json.dumps(body, indent=1, sort_keys=True) + "\n")


def load(path: Path) -> Results:
    """A results file (plain JSON: nothing in it runs); one line naming the file when it is not one."""
    try:
        body = json.loads(path.read_text())
        if body.get("format") != FORMAT:
            raise ValueError(f"format {body.get('format')!r}, expected {FORMAT}")
        return Results(
            body["study"], body["command"], body["machine"], body["commit"], body["date"], tuple(body["paper_tables"]), tuple(body["runs"])
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path} is not a results file of this platform ({type(err).__name__}: {err})") from None


def render(results: Results, source: str) -> str:
    """The Markdown block README.md holds for one results file (``source``: its path as shown)."""
    runs = with_s4_mean_error(with_relative_mce(results.frame()))
    lines = [
        f"_Generated by `mjp analyze readme` from `{source}`: {setup_caption(runs)}; "
        f"`{results.command}` on {results.machine}, commit {results.commit[:10]}, {results.date}. "
        f"Regenerate with `mjp analyze results --study {results.study}` after that command, then `mjp analyze readme`._",
        "",
        to_markdown(study_table(runs)),
    ]
    directions = directions_text(runs)
    lines += ["", directions] if directions else []
    for key in results.paper_tables:
        lines += ["", paper_text(key, paper_comparison(runs, key), setup_caption(runs))]
    return "\n".join(lines)


def _markers(study: str) -> tuple[str, str]:
    return f"<!-- results:{study} -->", f"<!-- /results:{study} -->"


def readme_blocks(readme: str) -> dict[str, str]:
    """Each generated block of README.md by study (the text between its markers)."""
    return {m.group(1): m.group(2).strip("\n") for m in re.finditer(r"<!-- results:(\S+) -->\n(.*?)<!-- /results:\1 -->", readme, re.S)}


def _with_block(document: str, study: str, block: str) -> str:
    """``document`` with the text between the study's markers replaced by ``block``."""
    start, end = _markers(study)
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    return pattern.sub(lambda _: f"{start}\n{block}\n{end}", document)  # a function: ``block`` is not a template


def rendered_blocks(directory: Path, root: Path) -> dict[str, str]:
    """The block of every results file in ``directory``, by study."""
    return {path.stem: render(load(path), str(path.relative_to(root))) for path in sorted(directory.glob("*.json"))}


def documents_disagreements(documents: dict[str, str], blocks: dict[str, str]) -> list[str]:
    """Across several documents (name -> text, e.g. README.md and docs/results.md): studies whose
    block differs from its results file, is in no document or in more than one, or has no file."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name, text in documents.items():
        for study, block in readme_blocks(text).items():
            found.setdefault(study, []).append((name, block))
    where = " or ".join(documents)
    out = [f"results:{s}: {name} differs from results/{s}.json" for s in blocks for name, block in found.get(s, []) if block != blocks[s]]
    out += [f"results:{s}: no block in {where}" for s in blocks if s not in found]
    out += [f"results:{s}: a block in each of {', '.join(n for n, _ in found[s])}; keep one" for s in blocks if len(found.get(s, [])) > 1]
    out += [f"results:{s}: {name} has a block but there is no results/{s}.json" for s in found if s not in blocks for name, _ in found[s]]
    return out


def with_blocks_in(documents: dict[str, str], blocks: dict[str, str]) -> dict[str, str]:
    """Each document with the blocks whose markers it holds replaced; a study whose markers are
    in no document is an error (say where its table goes by adding the two markers)."""
    out = dict(documents)
    for study, block in blocks.items():
        holders = [name for name, text in documents.items() if study in readme_blocks(text)]
        if not holders:
            start, end = _markers(study)
            raise ValueError(f"{' or '.join(documents)} has no {start} ... {end} markers for results/{study}.json")
        for name in holders:
            out[name] = _with_block(out[name], study, block)
    return out
