"""What a Slurm sweep job runs (``JOB_DIR/job.json``): written by ``mjp cluster slurm`` at submission,
read by the job on every start (a requeue, an ``sbatch`` of the same script). Plain JSON, checked
field by field: nothing read from it runs code."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sweep.cluster.slurm.shape import SlurmShape
from trainables.errors import ConfigError
from trainables.written import write_atomically

SPEC_FILE = "job.json"
SCRIPT_FILE = "job.sbatch"
SWEEPS_DIR = "sweeps"  # the job's Tune storage: the one sweep it runs, and resumes on every start


@dataclass(frozen=True)
class JobSpec:
    """The study and how to run it (as ``mjp sweep run`` takes them), the allocation, where the
    MLflow store lives (``store_dir``: ``mlflow.db`` and ``artifacts/``), and how often the job
    may requeue itself at its time limit."""

    study: str
    smoke: bool
    shape: SlurmShape
    store_dir: str
    sets: list[str] = field(default_factory=list)
    data: str | None = None
    max_restarts: int = 20

    def write(self, job_dir: Path) -> None:
        write_atomically(job_dir / SPEC_FILE, json.dumps({**asdict(self), "shape": self.shape.to_json()}, indent=1) + "\n")

    @classmethod
    def read(cls, job_dir: Path) -> JobSpec:
        path = job_dir / SPEC_FILE
        try:
            raw = json.loads(path.read_text())
            shape = SlurmShape(**raw.pop("shape"))
            spec = cls(shape=shape, **raw)
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise ConfigError(f"{path}: not a job file `mjp cluster slurm` wrote ({err})") from None
        if not isinstance(spec.study, str) or not isinstance(spec.smoke, bool) or not all(isinstance(s, str) for s in spec.sets):
            raise ConfigError(f"{path}: study, smoke or sets of the wrong type")
        return spec
