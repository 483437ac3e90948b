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
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
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
