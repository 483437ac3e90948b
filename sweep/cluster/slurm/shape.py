"""What a Slurm job asks for (``SlurmShape``), Slurm's time format, and the shape checked against
the partition that ``sinfo`` describes, in one line each, before anything is submitted."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass

from trainables.errors import ConfigError

#: ``--time``: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds
_TIME = re.compile(r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$")


def time_limit_s(text: str) -> int:
    """Seconds in a Slurm ``--time`` (``30``, ``4:00:00``, ``2-12``, ``1-00:30:00``); ``ConfigError`` naming the forms."""
    m = _TIME.match(text.strip())
    if not m or text.strip() in ("0", ""):
        raise ConfigError(
            f"--time {text!r}: allowed are Slurm's forms MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, "
            "DAYS-HOURS, DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS (a finite limit: the job resumes in the next one)"
        )
    if m["days"] is not None:
        return int(m["days"]) * 86400 + int(m["dh"]) * 3600 + int(m["dm"] or 0) * 60 + int(m["ds"] or 0)
    parts = [int(p) for p in (m["a"], m["b"], m["c"]) if p is not None]
    if len(parts) == 3:
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    return parts[0] * 60 + (parts[1] if len(parts) == 2 else 0)


@dataclass(frozen=True)
class SlurmShape:
    """The allocation one sweep job asks for: ``nodes`` nodes, each with ``gpus_per_node`` GPUs and
    ``cpus_per_node`` CPUs (one task per node), in ``partition`` for ``time``; ``signal_lead_s``:
    how long before the limit Slurm sends the job SIGTERM (``--signal=B:TERM@...``) so that the
    sweep closes its runs and the job requeues itself."""

    nodes: int
    gpus_per_node: int
    cpus_per_node: int
    partition: str
    time: str
    account: str | None = None
    mem: str | None = None
    signal_lead_s: int = 180

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ConfigError(f"--nodes {self.nodes}: allowed is 1 or more")
        if self.gpus_per_node < 0:
            raise ConfigError(f"--gpus-per-node {self.gpus_per_node}: allowed is 0 or more")
        if self.cpus_per_node < 1:
            raise ConfigError(f"--cpus-per-node {self.cpus_per_node}: allowed is 1 or more")
        if not re.fullmatch(r"[A-Za-z0-9_.,-]+", self.partition):
            raise ConfigError(f"--partition {self.partition!r}: allowed are Slurm partition names (letters, digits, _ . , -)")
        if self.account is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", self.account):
            raise ConfigError(f"--account {self.account!r}: allowed are Slurm account names (letters, digits, _ . -)")
        if self.mem is not None and not re.fullmatch(r"\d+[KMGT]?", self.mem):
            raise ConfigError(f"--mem {self.mem!r}: allowed is Slurm's memory per node, e.g. 64G or 500000 (megabytes)")
        if not 10 <= self.signal_lead_s <= 3600:
            raise ConfigError(f"--signal-lead {self.signal_lead_s}: allowed is 10 to 3600 seconds")
        limit = time_limit_s(self.time)
        if limit < 2 * self.signal_lead_s:
            raise ConfigError(
                f"--time {self.time} ({limit} s) leaves no time to train: the job is signalled {self.signal_lead_s} s before its end "
                f"(--signal-lead); give a limit of at least {2 * self.signal_lead_s} s"
            )

    @property
    def time_s(self) -> int:
        return time_limit_s(self.time)

    def to_json(self) -> dict:
        return asdict(self)


class SlurmUnreachable(ConfigError):
    """Slurm's commands are here but answer nothing (no controller, no configuration)."""


@dataclass(frozen=True)
class NodeGroup:
    """One line of ``sinfo`` for a partition: ``count`` nodes with ``cpus`` CPUs and ``gpus`` GPUs each."""

    count: int
    cpus: int
    gpus: int


def gpus_in(gres: str) -> int:
    """GPUs in an ``sinfo %G`` field (``gpu:8``, ``gpu:a100:4(S:0-1),shard:8``, ``(null)``)."""
    total = 0
    for part in gres.split(","):
        fields = part.split("(")[0].split(":")
        if fields[0] == "gpu" and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def partition_nodes(partition: str, seconds: float = 120) -> list[NodeGroup]:
    """The partition's nodes as ``sinfo`` lists them; ``ConfigError`` when Slurm knows no such partition,
    ``SlurmUnreachable`` when ``sinfo`` fails, says it has no slurm.conf (which it retries for a
    minute: this does not wait for that), or has not answered within ``seconds``."""
    if shutil.which("sinfo") is None:
        raise ConfigError("no `sinfo` on PATH: run `mjp cluster slurm` on a Slurm login node (or give --dry-run to print the script)")
    returncode, stdout, said = _sinfo(["sinfo", "-h", "-p", partition, "-o", "%D %c %G"], seconds)
    no_config = [line for line in said if NO_CONFIG in line]
    if returncode is None and no_config:
        raise SlurmUnreachable(f"`sinfo -p {partition}` failed: {no_config[0]}")
    if returncode is None:
        raise SlurmUnreachable(f"`sinfo -p {partition}` failed: no answer in {seconds:g} s" + (f" ({said[0]})" if said else ""))
    if returncode != 0:
        raise SlurmUnreachable(f"`sinfo -p {partition}` failed: {said[-1] if said else f'exit {returncode}'}")
    groups = []
    for line in stdout.splitlines():
        count, cpus, gres = line.split(maxsplit=2) if len(line.split()) >= 3 else (*line.split(), "(null)")
        groups.append(NodeGroup(int(count), int(cpus.rstrip("+")), gpus_in(gres)))
    if not groups:
        known = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60).stdout.split()
        raise ConfigError(f"--partition {partition!r}: Slurm has no such partition (it has: {', '.join(sorted(set(known))) or 'none'})")
    return groups


#: what ``sinfo`` writes when it finds no slurm.conf, before it retries that for a minute
NO_CONFIG = "cannot stat file"


def _sinfo(argv: list[str], seconds: float) -> tuple[int | None, str, list[str]]:
    """Run ``sinfo``: its exit status (None when it was stopped: it said it has no slurm.conf, or had
    not ended within ``seconds``), its output, and the lines it wrote to stderr."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    no_config = threading.Event()

    def read_errors() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if line.strip():
                said.append(line.strip())
            if NO_CONFIG in line:
                no_config.set()

    reader = threading.Thread(target=read_errors, daemon=True)
    reader.start()
    deadline = time.monotonic() + seconds
    while process.poll() is None and not no_config.is_set() and time.monotonic() < deadline:
        no_config.wait(0.1)
    if process.poll() is None:
        process.kill()
        process.wait()
        reader.join(timeout=5)
        return None, "", said
    stdout = process.stdout.read() if process.stdout is not None else ""
    reader.join(timeout=5)
    return process.returncode, stdout, said


def check_fits(shape: SlurmShape, groups: list[NodeGroup]) -> None:
    """``ConfigError`` in one line when the partition has fewer than ``shape.nodes`` nodes with the
    CPUs and GPUs asked for each."""
    fitting = sum(g.count for g in groups if g.cpus >= shape.cpus_per_node and g.gpus >= shape.gpus_per_node)
    if fitting >= shape.nodes:
        return
    has = ", ".join(f"{g.count} x ({g.cpus} CPUs, {g.gpus} GPUs)" for g in groups)
    raise ConfigError(
        f"--nodes {shape.nodes} x (--cpus-per-node {shape.cpus_per_node}, --gpus-per-node {shape.gpus_per_node}): "
        f"partition {shape.partition} has {fitting} such node{'s' if fitting != 1 else ''} (its nodes: {has})"
    )
