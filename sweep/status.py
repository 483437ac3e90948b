"""``mjp sweep status``: the sweeps in an MLflow store and their trials' states.

Reads MLflow only (no torch, no Ray) and never creates a store. A sweep whose parent run says
RUNNING but whose driver process is gone (killed with SIGKILL, a lost machine) is shown as such,
with the command that resumes it.
"""

from __future__ import annotations

import argparse
import os
import socket

from mjp import keys


def driver_alive(driver: str | None) -> bool | None:
    """Whether ``host:pid`` is a living process (None when it ran on another host or is unknown)."""
    if not driver or ":" not in driver:
        return None
    host, _, pid = driver.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_state(status: str, tags: dict[str, str]) -> str:
    """The sweep's state in words: finished, failed, interrupted (resumable), running or dead."""
    resume = f"; resume: mjp sweep resume {tags.get('mjp.experiment_dir', '<dir>')}"
    if status == "KILLED":
        return f"interrupted ({tags.get(keys.TAG_INTERRUPTED, 'killed')})" if keys.TAG_INTERRUPTED in tags else f"killed{resume}"
    if status == "RUNNING" and driver_alive(tags.get("mjp.driver")) is False:
        return f"driver gone (killed?), trials stopped{resume}"
    return status.lower()


def cmd_sweep_status(args: argparse.Namespace) -> int:
    from analysis.runs import sweep_summaries
    from trainables.tracking import check_store_readable, tracking_uri

    uri = tracking_uri(args.uri)
    check_store_readable(uri)
    if args.study:
        from analysis.runs import recorded_studies
        from sweep.study_names import check_study_name

        check_study_name(args.study, recorded_studies(uri), uri)
    sweeps = sweep_summaries(uri, args.study, args.limit)
    if not sweeps:
        print(f"no sweeps{' of study ' + repr(args.study) if args.study else ''} recorded in {uri}")
        return 0
    print(f"sweeps in {uri} (newest first):")
    for s in sweeps:
        shown = ", ".join(f"{n} {k}" for k, n in sorted(s.trial_states.items())) or "no trials yet"
        print(f"  {s.run_name}  [{sweep_state(s.status, s.tags)}]  {shown} of {s.params.get('trials', '?')} trials  parent={s.run_id}")
    return 0
