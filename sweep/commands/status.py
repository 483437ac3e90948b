"""``mjp sweep status [STUDY | SWEEP_DIR]``: the sweeps in an MLflow store and each of their trials
(name, state, key metrics, MLflow run id: what ``mjp evaluate --run`` and ``mjp attack --run`` take).

Reads MLflow only (no torch, no Ray) and never creates a store. A sweep whose parent run says
RUNNING but whose driver process is gone (killed with SIGKILL, a lost machine) is shown as such,
with the command that resumes it.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.markdown import format_value
from mjp import keys
from sweep.tuner.owner import driver_alive
from trainables.errors import UserError
from trainables.tracking import schema

if TYPE_CHECKING:
    from analysis.runs import SweepSummary, TrialSummary
    from sweep.tuner.state import SweepState


def resume_command(tags: dict[str, str], uri: str | None = None) -> str:
    """The command that resumes the sweep whose parent run has ``tags``, read in the store at ``uri``:
    with ``--uri`` when its state file records another address that no longer answers (its server
    moved). A recorded server that answers is left alone: the same store seen through a tunnel
    (``localhost:5000`` here, the head's address there) is not a move."""
    where = tags.get(schema.TAG_EXPERIMENT_DIR, "<dir>")
    command = f"mjp sweep resume {where}"
    if uri is None or where == "<dir>":
        return command
    from sweep.tuner.state import read_state

    try:
        recorded = read_state(where).uri
    except UserError:  # the directory is elsewhere (a bucket, another machine): nothing to compare
        return command
    if recorded == uri:
        return command
    if recorded.startswith("sqlite:///"):  # a store file: moved when the recorded one is gone
        return command if Path(recorded[len("sqlite:///") :]).exists() else f"{command} --uri {uri}"
    from trainables.tracking.store import server_silence

    return command if server_silence(recorded, 3.0) is None else f"{command} --uri {uri}"


def driver_gone(status: str, tags: dict[str, str]) -> bool:
    """Whether a sweep's parent run (``status``, ``tags``) says RUNNING while its driver process is
    gone: killed with SIGKILL, or its machine lost. Its trials' runs still say RUNNING, for the resume
    to take them up, but their processes ended with the driver's job (a local Ray's watcher, a
    cluster's Ray, end a lost driver's actors)."""
    return status == "RUNNING" and driver_alive(tags.get(schema.TAG_DRIVER)) is False


def sweep_state(status: str, tags: dict[str, str], uri: str | None, gone: bool) -> tuple[str, str | None]:
    """The sweep's state in words (finished, failed, interrupted, running or dead) and, where it
    should be resumed, the command that does it (``resume_command``: with ``--uri`` where the
    server moved). ``gone``: the sweep's ``driver_gone``, asked once by the caller, so that its
    trials' states say the same as the sweep's, even of a driver that ended meanwhile."""
    resume = resume_command(tags, uri)
    if status == "KILLED":
        return (f"interrupted ({tags[schema.TAG_INTERRUPTED]})", None) if schema.TAG_INTERRUPTED in tags else ("killed", resume)
    if gone:
        return "driver gone (killed?), trials stopped", resume
    return status.lower(), None


def trial_state(trial: TrialSummary, sweep_driver_gone: bool = False) -> str:
    """A trial's state in words (a finished run the scheduler stopped says so; a run still RUNNING
    in a sweep whose driver is gone, ``sweep_driver_gone``, is not running)."""
    status = trial.status.lower()
    if status == "finished" and schema.TAG_STOPPED in trial.tags:
        return "stopped early"
    if status == "killed" and schema.TAG_ORPHAN in trial.tags:
        return "lost with a driver"
    if status == "killed" and schema.TAG_INTERRUPTED in trial.tags:
        return "interrupted"
    if status == "running" and sweep_driver_gone:
        return "stopped with its driver"
    return status


def _metric_columns(sweep: SweepSummary) -> list[str]:
    """The sweep's objectives, then val/top1 and val/consistency where a trial has them."""
    columns = [metric for metric, _ in sweep.params.objectives]
    for key in (keys.VAL_TOP1, keys.VAL_CONSISTENCY):
        if key not in columns and any(key in t.metrics for t in sweep.trials):
            columns.append(key)
    return columns


def trials_table(sweep: SweepSummary, indent: str = "    ", width: int = 10_000, sweep_driver_gone: bool = False) -> str:
    """Each trial of ``sweep``: name, state, key metrics, MLflow run id (for ``--run``); the
    reasons of failed trials below. Where a row would not fit ``width`` columns, each run id goes
    on a line of its own below its trial, whole (a terminal would break it where a user copies it).
    ``sweep_driver_gone``: the sweep's ``driver_gone``, asked once by the caller."""
    columns = _metric_columns(sweep)
    rows = [["trial", "state", *columns, "MLflow run id"]]
    rows += [
        [t.name, trial_state(t, sweep_driver_gone), *(format_value(c, t.metrics.get(c)) for c in columns), t.run_id] for t in sweep.trials
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    split = len(indent) + sum(widths) + 2 * (len(widths) - 1) > width
    if split:
        rows, widths = [r[:-1] for r in rows], widths[:-1]
    lines = []
    for k, r in enumerate(rows):
        lines.append(
            indent
            + "  ".join(
                c.ljust(w) if i < 2 or (i == len(r) - 1 and not split) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
        if split and k:
            lines.append(f"{indent}  MLflow run id {sweep.trials[k - 1].run_id}")
    for t in sweep.trials:
        if t.status == "FAILED" and schema.TAG_ERROR in t.tags:  # a sentence: wraps between words where it would not fit
            lines.append(
                textwrap.fill(
                    f"{t.name}: {t.tags[schema.TAG_ERROR][:200]}",
                    width,
                    initial_indent=indent,
                    subsequent_indent=indent + "  ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    return "\n".join(lines)


def _study_name(target: str, uri: str) -> str:
    """``target`` as a study name: a study file's name, a shipped study or one recorded in the store."""
    from analysis.runs import recorded_studies

    path = Path(target)
    if path.is_file():
        from trainables.config.yaml_files import read_yaml_mapping

        return str(read_yaml_mapping(path, "study file", allow_empty=True).get("name", path.stem))
    from sweep.study.names import check_study_name

    check_study_name(target, recorded_studies(uri), uri)
    return target


def recorded_store(state: SweepState, target: str) -> str:
    """The store a sweep directory's state records, refused in one line naming ``--uri`` when no
    server answers there (it moved: a new head or twin)."""
    from trainables.tracking.store import TrackingError, is_tracking_server, server_silence, tracking_uri

    uri = state.uri
    silence = server_silence(uri, 5.0) if is_tracking_server(uri) else None
    if silence is not None:
        raise TrackingError(
            f"no MLflow server answers at {uri}, where sweep {target} recorded its store ({silence}); if it moved (a new head or twin): "
            f"`mjp sweep status {target} --uri NEW_URI`, then `mjp sweep resume {target} --uri NEW_URI`"
        )
    return tracking_uri(uri)


def cmd_sweep_status(args: argparse.Namespace) -> int:
    from analysis.runs import sweep_named, sweep_summaries, sweep_summary
    from sweep.tuner.state import read_state
    from trainables.tracking.store import check_store_readable, tracking_uri

    target = args.target or args.study
    if target and (Path(target).is_dir() or "/" in target and not Path(target).is_file()):
        if not Path(target).is_dir():
            raise UserError(f"sweep directory {target} does not exist (the path `mjp sweep run` printed, under ray_results/)")
        state = read_state(target)
        uri = tracking_uri(args.uri) if args.uri else recorded_store(state, target)
        check_store_readable(uri)
        sweeps = [sweep_summary(uri, state.parent_run_id)]
    else:
        uri = tracking_uri(args.uri)
        check_store_readable(uri)
        named = sweep_named(uri, target) if target and not Path(target).is_file() else None
        study = _study_name(target, uri) if target and named is None else None
        sweeps = [sweep_summary(uri, named)] if named else sweep_summaries(uri, study, args.limit)
        if not sweeps:
            print(f"no sweeps{' of study ' + repr(study) if study else ''} recorded in {uri}")
            return 0
    from sweep.console.commands_shown import for_terminal, terminal_columns

    header = f"sweeps in {uri} (newest first):"
    print(header if len(header) <= terminal_columns() else f"sweeps (newest first) in\n  {uri}")
    for s in sweeps:
        gone = driver_gone(s.status, s.tags)
        states = s.trial_states
        if gone and "running" in states:
            states["stopped with its driver"] = states.pop("running")
        shown = ", ".join(f"{n} {k}" for k, n in sorted(states.items())) or "no trials yet"
        label, resume = ("deleted in MLflow: restore its run to resume it", None) if s.deleted else sweep_state(s.status, s.tags, uri, gone)
        print(for_terminal(f"  {s.run_name}  [{label}]  {shown} of {s.params.trials or '?'} trials"))
        print(for_terminal(f"    parent run {s.run_id}" + (f"\n    resume: {resume}" if resume else "")))
        if s.trials:
            print(trials_table(s, width=terminal_columns(), sweep_driver_gone=gone))
    return 0
