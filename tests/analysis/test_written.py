"""A write the analysis makes is one step: killed half-way, the old file is still there, whole."""

import os

import pytest

from analysis.written import write_atomically


def test_a_write_killed_half_way_leaves_the_old_file_whole_and_no_part_behind(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("the old tables\n")
    os.chmod(readme, 0o644)

    def killed(fd: int) -> None:  # the moment between writing the new text and renaming it
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(readme, "the new tables, half written ...")
    assert readme.read_text() == "the old tables\n" and os.listdir(tmp_path) == ["README.md"]

    monkeypatch.undo()
    write_atomically(readme, "the new tables\n")
    assert readme.read_text() == "the new tables\n" and os.listdir(tmp_path) == ["README.md"]
    assert readme.stat().st_mode & 0o777 == 0o644  # its mode kept
    write_atomically(tmp_path / "new.json", "{}\n")
    assert (tmp_path / "new.json").read_text() == "{}\n"
