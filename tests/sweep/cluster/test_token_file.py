"""The Ray token file of the twin and of a Slurm job (``write_token``): fresh, 0600 from before its
first byte, whole, and never written through a link at its name."""

import os
import re

from sweep.cluster.twin import write_token


def test_the_session_token_is_fresh_and_private_even_over_a_readable_file(tmp_path):
    path = tmp_path / "auth_token"
    path.write_text("an old token")
    path.chmod(0o644)
    first = write_token(path).read_text()
    assert re.fullmatch(r"[0-9a-f]{64}", first) and path.stat().st_mode & 0o777 == 0o600
    assert write_token(path).read_text() != first


def test_the_token_is_private_while_it_is_written(tmp_path, monkeypatch):
    seen = []
    fsync = os.fsync

    def check(fd: int) -> None:  # the token's bytes are in the file by now
        seen.append(os.fstat(fd).st_mode & 0o777)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", check)
    write_token(tmp_path / "auth_token")
    assert seen == [0o600]


def test_a_link_at_the_token_is_replaced_and_its_target_left_as_it_was(tmp_path):
    target = tmp_path / "someone-elses-file"
    target.write_text("not a token\n")
    target.chmod(0o644)
    (tmp_path / "auth_token").symlink_to(target)
    token = write_token(tmp_path / "auth_token")
    assert not token.is_symlink() and token.stat().st_mode & 0o777 == 0o600
    assert target.read_text() == "not a token\n" and target.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["auth_token", "someone-elses-file"]
