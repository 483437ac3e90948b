"""A private local Ray's token: made in a process secret file unless one this process can read is
given; an inherited path it cannot open (a parent's secret file, seen from another user namespace
or after the parent ended) is replaced, not handed to Ray, which refused to start with it."""

import os
import stat

from trainables.launch.ray_runtime import _private_ray_token


def test_an_unreadable_inherited_token_path_is_replaced_by_a_readable_private_one(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "gone" / "13"))
    _private_ray_token()
    path = os.environ["RAY_AUTH_TOKEN_PATH"]
    assert path != str(tmp_path / "gone" / "13")
    with open(path) as fh:
        assert len(fh.read().strip()) == 64
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_readable_token_path_is_kept(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("ab" * 32)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    _private_ray_token()
    assert os.environ["RAY_AUTH_TOKEN_PATH"] == str(token)
