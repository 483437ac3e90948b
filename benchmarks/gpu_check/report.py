"""The check's one Markdown report and one JSON, from the steps' results in ``OUT``: the machine,
every GPU row of BENCHMARKS.md (measured, or "not measured" with the step that failed and its last
line), then each step with its status, time and log. Standard library only: the report is written
even when torch itself would not import."""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.gpu_check.rows import ROWS, Row
from trainables.written import write_atomically

REPORT_MD, REPORT_JSON = "gpu-check.md", "gpu-check.json"


def read_steps(out: Path) -> dict[str, dict[str, Any]]:
    """Each step's status line (``steps.tsv``: name, exit status, seconds, limit) and its result."""
    steps: dict[str, dict[str, Any]] = {}
    status = out / "steps.tsv"
    for line in status.read_text().splitlines() if status.exists() else []:
        name, rc, seconds, limit = line.split("\t")
        log = out / "logs" / f"{name}.log"
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
        result_file = out / "steps" / f"{name}.json"
        steps[name] = {
            "exit": int(rc),
            "seconds": int(seconds),
            "limit_s": int(limit),
            "log": f"logs/{name}.log",
            "last_line": lines[-1].strip() if lines else "",
            "result": json.loads(result_file.read_text()) if result_file.exists() and rc == "0" else None,
        }
    return steps


def junit_summary(path: Path) -> dict[str, Any] | None:
    """passed / failed / skipped counts and the names (with the reason) of those not passed."""
    if not path.exists():
        return None
    cases = ET.parse(path).getroot().iter("testcase")
    out: dict[str, Any] = {"passed": 0, "failed": [], "skipped": []}
    for case in cases:
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            out["failed"].append(f"{name}: {(bad.get('message') or '').splitlines()[0][:160] if bad.get('message') else ''}")
        elif skipped is not None:
            out["skipped"].append(f"{name}: {(skipped.get('message') or '')[:160]}")
        else:
            out["passed"] += 1
    return out


def read_plan(out: Path) -> tuple[list[str], int | None]:
    """The steps in the order the check runs them, and its deadline in seconds (None: not written)."""
    plan, deadline = out / "steps.plan", out / "deadline"
    return (plan.read_text().split() if plan.exists() else []), (int(deadline.read_text()) if deadline.exists() else None)


def status_text(step: dict[str, Any] | None, name: str, deadline: int | None = None) -> str:
    if step is None:
        if deadline is not None:
            return f"not reached (step `{name}` did not start within the {deadline} s deadline)"
        return f"not run (step `{name}` did not start)"
    if step["exit"] == 0:
        return "ok"
    why = f"timed out after {step['limit_s']} s" if step["exit"] in (124, 137) else f"exit {step['exit']}"
    return f"failed ({why}): {step['last_line'][:200]}"


def row_value(row: Row, steps: dict[str, dict[str, Any]], deadline: int | None = None) -> str:
    step = steps.get(row.step)
    if step is None or step["result"] is None:
        return f"not measured (step `{row.step}` {status_text(step, row.step, deadline)})"
    try:
        return row.measure(step["result"])
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        return f"not measured (step `{row.step}` wrote no {exc})"


def write_report(out: Path) -> tuple[str, dict[str, Any]]:
    steps = read_steps(out)
    plan, deadline = read_plan(out)
    not_reached = [name for name in plan if name not in steps]
    tests = junit_summary(out / "steps" / "tests.xml")
    if "tests" in steps and tests is not None:
        steps["tests"]["result"] = tests
    env = (steps.get("environment") or {}).get("result") or {}
    mode = (env.get("sizes") or {}).get("device") or next(
        (s["result"]["sizes"]["device"] for s in steps.values() if s["result"] and "sizes" in s["result"]), "?"
    )
    rows = [
        {"row": r.name, "value": row_value(r, steps, deadline), "target": r.target if mode == "cuda" else "", "step": r.step} for r in ROWS
    ]
    failed = [name for name, s in steps.items() if s["exit"] != 0]
    md = [
        f"# GPU check: {env.get('gpu') or ('no GPU (--cpu: tiny sizes, the check of the check)' if mode == 'cpu' else 'unknown GPU')}",
        "",
        f"- machine: {env.get('nvidia_smi') or env.get('gpu') or 'no GPU'}; {env.get('machine', '?')}",
        f"- torch {env.get('torch', '?')}, CUDA {env.get('cuda', '?')}, timm {env.get('timm', '?')}, Python {env.get('python', '?')}; "
        f"commit {env.get('commit', '?')}",
        f"- mode: {mode}; libraries: " + ", ".join(f"{k} {v}" for k, v in (env.get("libraries") or {}).items()),
        (
            "- Ray Train cannot travel in the kit (Ray's wheel alone is 78 MB): the engine rows time `train_one_epoch`, the step "
            "Ray Train's workers run; Ray Train adds a process around that step, not work inside it."
        ),
        f"- steps failed: {', '.join(failed) if failed else 'none'}",
        f"- steps not reached (deadline {deadline} s): {', '.join(not_reached) if not_reached else 'none'}",
        "",
        "| row | measured | target | step |",
        "| --- | --- | --- | --- |",
        *(f"| {r['row']} | {r['value']} | {r['target']} | `{r['step']}` |" for r in rows),
        "",
        "| step | status | seconds (limit) | log |",
        "| --- | --- | ---: | --- |",
        *(f"| {name} | {status_text(s, name)} | {s['seconds']} ({s['limit_s']}) | {s['log']} |" for name, s in steps.items()),
        *(f"| {name} | {status_text(None, name, deadline)} | | |" for name in not_reached),
        "",
    ]
    record = {
        "mode": mode,
        "environment": env,
        "rows": rows,
        "steps": steps,
        "failed": failed,
        "not_reached": not_reached,
        "deadline_s": deadline,
    }
    # whole or as before: the check can be cut off at any moment (the machine's time ends), and the
    # last report is what comes back
    write_atomically(out / REPORT_MD, "\n".join(md))
    write_atomically(out / REPORT_JSON, json.dumps(record, indent=1, default=str))
    return "\n".join(md), record


def main(argv: list[str] | None = None, echo: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path, help="the check's output folder")
    args = parser.parse_args(argv)
    md, _ = write_report(args.out)
    echo(md)
    echo(f"report: {args.out / REPORT_MD}, {args.out / REPORT_JSON}")


if __name__ == "__main__":
    main()
