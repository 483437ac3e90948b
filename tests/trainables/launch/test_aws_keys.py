"""AWS keys leave the environment for a private file before Ray or Tune can pass them on."""

import os
import stat

import boto3

from trainables.launch.aws_keys import keys_to_private_file


def test_keys_move_to_a_file_only_this_user_reads_and_boto3_still_finds_them(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret/Key+value")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "old-token")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SHARED_CREDENTIALS_FILE", raising=False)
    path = keys_to_private_file()
    assert path is not None and not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN"} & set(os.environ)
    assert "s3cret" not in repr(dict(os.environ))  # what Tune copies into each trial's runtime env
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0
    assert os.environ["AWS_SHARED_CREDENTIALS_FILE"] == str(path)
    credentials = boto3.Session().get_credentials()
    assert (credentials.access_key, credentials.secret_key, credentials.token) == ("AKIAEXAMPLE", "s3cret/Key+value", "old-token")
    assert keys_to_private_file() is None  # nothing left to move


def test_tune_finds_no_key_to_copy_into_a_trial(monkeypatch):
    from ray.tune.execution import class_cache

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    keys_to_private_file()
    assert not {name for name in class_cache.ENV_VARS_TO_PROPAGATE if name in os.environ and name.startswith("AWS_")}


def test_the_credentials_file_ends_with_its_process_even_by_sigkill(tmp_path):
    """It was a file under /tmp, removed at exit: a SIGKILL left the three keys there in plain text."""
    import signal
    import subprocess
    import sys

    script = "from trainables.launch.aws_keys import keys_to_private_file; print(keys_to_private_file(), flush=True); input()"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cret/Key+value", "TMPDIR": str(tmp_path)}
    env.pop("AWS_SHARED_CREDENTIALS_FILE", None)
    env.pop("AWS_PROFILE", None)
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        path = child.stdout.readline().strip()
        reader = {**env, "AWS_SHARED_CREDENTIALS_FILE": path}
        found = subprocess.run(  # another process of this user reads it while its maker lives
            [sys.executable, "-c", "import boto3; c = boto3.Session().get_credentials(); print(c.access_key, c.secret_key)"],
            env={k: v for k, v in reader.items() if not k.startswith("AWS_") or k == "AWS_SHARED_CREDENTIALS_FILE"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert found.stdout.split() == ["AKIAEXAMPLE", "s3cret/Key+value"], found.stderr[-2000:]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert not os.path.exists(path) and list(tmp_path.iterdir()) == []  # nothing outlives the process
