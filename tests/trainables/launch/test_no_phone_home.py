"""Nothing phones home: in a process the platform starts, with none of the CI variables by which
MLflow turns its telemetry off by itself, MLflow's telemetry, Ray's usage stats and the Hugging
Face hub's calls are off, in the ``mjp`` process and in the Ray workers it starts; cluster.yaml's
nodes export the same switches. The same probe finds the workers at the process's own priority
(Ray's default, nice 15, starved every trial beside a busy process: 4 % of a core)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.study.names import PROJECT_DIR
from trainables.launch.ray_runtime import NO_PHONE_HOME

#: an ``mjp`` command that reads MLflow, then the state of each library's background calls in this
#: process and in a Ray worker it starts
PROBE = """
import sys
from sweep.cli import main

main(["sweep", "status", "fashion", "--uri", sys.argv[1]])  # no sweep recorded: its answer does not matter here
assert "mlflow" in sys.modules


def calls_home():
    import huggingface_hub.constants as hub
    from mlflow.telemetry import get_telemetry_client
    from ray._common.usage.usage_lib import usage_stats_enabled

    return {
        "mlflow telemetry": get_telemetry_client() is not None,
        "ray usage stats": usage_stats_enabled(),
        "hf hub telemetry": not hub.HF_HUB_DISABLE_TELEMETRY,
        "hf hub online": not hub.HF_HUB_OFFLINE,
    }


import os
import ray
from trainables.launch.ray_runtime import ensure_ray

print("process", calls_home())
ensure_ray(num_cpus=1)
print("worker", ray.get(ray.remote(calls_home).remote()))
print("niceness", os.nice(0), ray.get(ray.remote(lambda: os.nice(0)).remote()))
ray.shutdown()
"""


def test_a_process_the_platform_starts_outside_ci_has_every_background_call_off(tmp_path):
    # only what a user's shell would hold: no CI, GITHUB_ACTIONS, PYTEST_CURRENT_TEST, ... (MLflow
    # reads those and turns its telemetry off by itself, which hid the fault from every test)
    env = {name: os.environ[name] for name in ("PATH", "HOME", "MJP_HOME", "TMPDIR", "LANG") if name in os.environ}
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    out = subprocess.run([sys.executable, str(probe), uri], env=env, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    off = str({"mlflow telemetry": False, "ray usage stats": False, "hf hub telemetry": False, "hf hub online": False})
    lines = [line for line in out.stdout.splitlines() if line.startswith(("process ", "worker "))]
    assert lines == [f"process {off}", f"worker {off}"]
    (niceness,) = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("niceness ")]
    assert niceness[0] == niceness[1], f"the process at nice {niceness[0]}, its Ray worker at nice {niceness[1]}"


def test_cluster_yaml_nodes_export_every_switch():
    tree = yaml.safe_load((Path(PROJECT_DIR) / "cluster.yaml").read_text())
    exported = " ".join(c for c in tree["setup_commands"] if "bashrc" in c)
    for name, value in NO_PHONE_HOME.items():
        assert f" {name}={value}" in exported, name


@pytest.mark.parametrize("switches", [{}, {"MLFLOW_DISABLE_TELEMETRY": "false", "DO_NOT_TRACK": "false"}], ids=["unset", "turned-on"])
def test_the_test_processes_start_with_mlflows_telemetry_off_before_a_module_imports_mlflow(switches):
    """As pytest collects a test module that imports MLflow at its top: outside a test, where MLflow
    does not see PYTEST_CURRENT_TEST, in an environment without the switches or with them turned on."""
    probe = (
        "import os, tests.conftest, mlflow; from mlflow.telemetry import get_telemetry_client; "
        "print(get_telemetry_client(), '_MLFLOW_TELEMETRY_SESSION_ID' in os.environ)"
    )
    env = {name: value for name, value in os.environ.items() if name not in NO_PHONE_HOME and name != "PYTEST_CURRENT_TEST"}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=PROJECT_DIR,
        env={**env, **switches, "PYTHONPATH": str(PROJECT_DIR)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["None", "False"], out.stdout[-500:]
