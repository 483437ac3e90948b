"""A job's file and what its process runs: written once, read on every start, never executed."""

import pytest

from sweep.cluster.slurm.job import driver_command
from sweep.cluster.slurm.job_spec import JobSpec
from sweep.cluster.slurm.script import batch_script
from sweep.cluster.slurm.shape import SlurmShape
from trainables.errors import ConfigError

SHAPE = SlurmShape(4, 8, 96, "gpu", "2-00", account="lab", mem="500G", signal_lead_s=300)


def test_a_job_file_round_trips_and_a_foreign_one_is_refused(tmp_path):
    spec = JobSpec("variants", False, SHAPE, str(tmp_path / "mlflow"), ["optim.epochs=3"], "/shared/imagenet", 5)
    spec.write(tmp_path)
    assert JobSpec.read(tmp_path) == spec
    (tmp_path / "job.json").write_text('{"study": "x", "shape": {"nodes": 1}}')
    with pytest.raises(ConfigError, match="not a job file `mjp cluster slurm` wrote"):
        JobSpec.read(tmp_path)
    (tmp_path / "job.json").write_text("!!python/object/apply:os.system ['true']")
    with pytest.raises(ConfigError, match="not a job file"):
        JobSpec.read(tmp_path)


def test_the_first_start_runs_the_study_and_every_later_start_resumes_its_sweep(tmp_path):
    spec = JobSpec("variants", True, SHAPE, str(tmp_path / "mlflow"), ["optim.epochs=3"], "/shared/imagenet")
    first = driver_command(spec, tmp_path, "10.0.0.1:40000", "http://10.0.0.1:41000")
    assert first[3:6] == ["sweep", "run", "variants"] and "--smoke" in first
    assert {"--set=optim.epochs=3", "--data=/shared/imagenet"} <= set(first)
    assert first[first.index("--storage") + 1] == str(tmp_path / "sweeps")
    sweep = tmp_path / "sweeps" / "variants-smoke-20261127-120000"
    sweep.mkdir(parents=True)
    (sweep / "mjp_sweep.json").write_text("{}")
    later = driver_command(spec, tmp_path, "10.0.0.2:40001", "http://10.0.0.2:41001")
    assert later[3:6] == ["sweep", "resume", str(sweep)]
    assert later[later.index("--uri") + 1] == "http://10.0.0.2:41001", "the store at this job's gate"


def test_the_batch_script_asks_for_the_shape_and_runs_one_command(tmp_path):
    script = batch_script(SHAPE, tmp_path / "job", tmp_path / "project", "mjp-variants", python="/opt/env/bin/python")
    directives = {line.split(None, 1)[1] for line in script.splitlines() if line.startswith("#SBATCH")}
    assert directives >= {"--nodes=4", "--cpus-per-task=96", "--gpus-per-node=8", "--time=2-00", "--signal=B:TERM@300", "--requeue"}
    assert directives >= {"--account=lab", "--mem=500G", "--partition=gpu", f"--output={tmp_path}/job/slurm-%j.out"}
    commands = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert commands == [
        "set -euo pipefail",
        f"cd {tmp_path}/project",
        f"exec /opt/env/bin/python -m sweep.cli cluster slurm-job {tmp_path}/job",
    ]


def test_ray_node_ids_map_to_the_slurm_nodes_whose_folder_their_raylet_lives_in():
    from sweep.cluster.slurm.job import slurm_nodes_of
    from sweep.cluster.slurm.ray_nodes import ray_temp_dir

    alive = {
        "aa": f"{ray_temp_dir('17', 'gpu001')}/session_2026/sockets/raylet",
        "bb": f"{ray_temp_dir('17', 'gpu0010')}/session_2026/sockets/raylet",
        "cc": "/tmp/ray/session_other/sockets/raylet",
    }
    assert slurm_nodes_of(alive, "17", ["gpu001", "gpu0010"]) == {"aa": "gpu001", "bb": "gpu0010"}
