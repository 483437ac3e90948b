"""What a Slurm job says when one of its processes ends while it starts (``JobProcesses``): the
process's own last words, not ``srun``'s note that its task exited."""

import sys

import pytest

from sweep.cluster.slurm.job_processes import JobProcesses, why_it_ended
from trainables.errors import ConfigError

#: what `ray start --block` prints when one of its processes dies, then srun's own line
RAY_START_DIED = """
import sys
print("Local node IP: 127.0.0.1")
print("Some Ray subprocesses exited unexpectedly:")
print("  dashboard_agent [exit code=1]")
print("Remaining processes will be killed.")
sys.stdout.flush()
print("srun: error: n2: task 0: Exited with exit code 1", file=sys.stderr)
sys.exit(1)
"""


def test_a_node_that_ended_while_the_job_started_is_named_with_rays_reason_not_sruns(tmp_path):
    processes = JobProcesses()
    log = tmp_path / "node-n2.log"
    node = processes.start("node n2's Ray", [sys.executable, "-c", RAY_START_DIED], {}, log)
    assert node.wait() == 1
    with pytest.raises(ConfigError) as err:
        processes.check_alive()
    message = str(err.value)
    assert message.startswith("node n2's Ray ended (1) while the job started: Some Ray subprocesses exited unexpectedly: / ")
    assert "dashboard_agent [exit code=1] / Remaining processes will be killed." in message and "srun:" not in message
    assert message.endswith(f"(log: {log})")


def test_a_log_of_only_sruns_lines_or_none_still_says_something(tmp_path):
    log = tmp_path / "node.log"
    assert why_it_ended(log) == "no output"
    log.write_text("\n\nsrun: error: n2: task 0: Exited with exit code 1\n")
    assert why_it_ended(log) == "srun: error: n2: task 0: Exited with exit code 1"
