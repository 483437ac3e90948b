"""``mjp analyze results`` and ``mjp analyze readme``: the results tables of README.md and docs/*.md
from committed files (``analysis.results``)."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
from pathlib import Path

from sweep.study.names import PROJECT_DIR, named_inside
from trainables.errors import UserError
from trainables.tracking import schema

#: the checkout: README.md, docs/ and results/ live here
ROOT = PROJECT_DIR
RESULTS = ROOT / "results"


def documents(root: Path = ROOT) -> dict[str, Path]:
    """The documents that may hold generated results blocks, by their path as shown: README.md, docs/*.md."""
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return {str(p.relative_to(root)): p for p in paths if p.is_file()}


def machine_description() -> str:
    """``AMD EPYC, 2 cores, Linux`` (the CPU's model name from /proc/cpuinfo where there is one)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()}"


def current_commit() -> str:
    """This checkout's commit (for sweeps whose parent run did not record one)."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def cmd_analyze_results(args: argparse.Namespace) -> int:
    import yaml

    from analysis.results import from_runs, save
    from analysis.runs import load_runs, load_sweeps, sweep_record
    from trainables.tracking.store import check_store_readable, tracking_uri

    named_inside(RESULTS, args.study, ".json")  # before MLflow is read
    uri = tracking_uri(args.uri)
    check_store_readable(uri)
    sweeps = load_sweeps(uri, args.study)
    if sweeps.empty:
        from analysis.runs import recorded_studies
        from sweep.study.names import no_sweep_error

        raise no_sweep_error(args.study, recorded_studies(uri), uri)
    newest = sweeps.iloc[0]
    record = sweep_record(uri, newest.run_id)
    if record.tags.get(schema.TAG_SMOKE) == "True":
        raise UserError(
            f"the newest sweep of {args.study!r} ({record.run_name}) is a smoke run: results files hold full studies; "
            "run the study without --smoke"
        )
    paper = tuple(str(t) for t in (yaml.safe_load(record.study_yaml) or {}).get("paper", [])) if record.study_yaml else ()
    commit = record.tags.get(schema.TAG_GIT_COMMIT) or current_commit()  # the code the sweep ran
    runs = load_runs(uri, parent_run_id=newest.run_id)
    started = datetime.datetime.fromtimestamp(newest.start_time.timestamp() if hasattr(newest.start_time, "timestamp") else 0, datetime.UTC)
    results = from_runs(
        runs,
        study=args.study,
        command=args.command or record.tags.get(schema.TAG_COMMAND) or f"mjp sweep run {args.study}",
        machine=machine_description(),
        commit=commit,
        date=started.strftime("%Y-%m-%d"),
        paper_tables=paper,
    )
    if not results.runs:
        raise UserError(f"the newest sweep of {args.study!r} ({record.run_name}) has no finished run: nothing to write")
    path = named_inside(RESULTS, args.study, ".json")
    save(results, path)
    print(
        f"wrote {path.relative_to(ROOT)}: {len(results.runs)} finished runs of {record.run_name}; "
        "`mjp analyze readme` puts them in README.md or docs/"
    )
    return 0


def cmd_analyze_readme(args: argparse.Namespace) -> int:
    from analysis.results import documents_disagreements, rendered_blocks, with_blocks_in
    from trainables.written import write_atomically

    paths = documents()
    try:
        blocks = rendered_blocks(RESULTS, ROOT)
        texts = {name: path.read_text() for name, path in paths.items()}
        if args.check:
            problems = documents_disagreements(texts, blocks)
            for line in problems:
                print(line)
            print("README.md and docs/ agree with results/" if not problems else "run `mjp analyze readme` to regenerate")
            return 1 if problems else 0
        updated = with_blocks_in(texts, blocks)
    except ValueError as err:
        raise UserError(str(err)) from None
    changed = [name for name in texts if updated[name] != texts[name]]
    for name in changed:
        write_atomically(paths[name], updated[name])
    print(
        f"{len(blocks)} results block(s) ({', '.join(blocks)}): {'updated in ' + ', '.join(changed) if changed else 'already up to date'}"
    )
    return 0
