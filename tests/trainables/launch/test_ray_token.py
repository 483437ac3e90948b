"""A private local Ray's token: Ray turns token authentication on for a local cluster and, with
no token set, wrote a fresh one to ``~/.ray/auth_token`` readable by every user (0644), left
there after the sweep. The platform hands it a token of its own process instead: mode 0600, on
no disk, gone with the process."""

import os
import subprocess
import sys

import pytest

from sweep.study.names import PROJECT_DIR

SCRIPT = """
import os, stat
from trainables.launch.ray_runtime import ensure_ray
ensure_ray(num_cpus=1)
import ray

@ray.remote
def token_seen():  # what a Ray worker reads
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return stat.S_IMODE(os.stat(path).st_mode), len(open(path).read())

print(*ray.get(token_seen.remote()), os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token"), flush=True)
ray.shutdown()
"""


@pytest.mark.slow
def test_a_private_local_ray_gets_a_0600_token_of_this_process_and_none_in_the_home_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env={**env, "HOME": str(home)}, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    mode, length, path = done.stdout.split()[-3:]
    assert (mode, length) == (str(0o600), "64") and path.startswith("/proc/")
    assert list(home.rglob("*")) == []  # no ~/.ray/auth_token
    assert not os.path.exists(path)  # gone with its process
