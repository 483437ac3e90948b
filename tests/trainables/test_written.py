"""A file the platform writes is replaced in one step: killed half-way, the old file is still there, whole."""

import os

import pytest

from trainables.process_identity import identity
from trainables.written import append_atomically, write_atomically


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


def test_an_append_is_whole_or_not_at_all_and_never_reads_or_writes_through_a_link(tmp_path, monkeypatch):
    """BENCHMARKS.md gets each benchmark's table at its end: once with ``open(path, "a")``, which a
    kill cut in the middle of a table and which wrote through a link at the name."""
    tables = tmp_path / "BENCHMARKS.md"
    append_atomically(tables, "# one\n")  # made when absent
    tables.chmod(0o640)
    append_atomically(tables, "\n# two\n")
    assert tables.read_text() == "# one\n\n# two\n" and tables.stat().st_mode & 0o777 == 0o640

    def killed(fd: int) -> None:  # between writing the longer file and renaming it
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        append_atomically(tables, "\n# three, half written")
    monkeypatch.undo()
    assert tables.read_text() == "# one\n\n# two\n" and os.listdir(tmp_path) == ["BENCHMARKS.md"]

    private = tmp_path / "private"
    private.write_text("someone else's secret\n")
    private.chmod(0o400)
    linked = tmp_path / "linked.md"
    linked.symlink_to(private)
    append_atomically(linked, "# a table\n")
    assert not linked.is_symlink() and linked.read_text() == "# a table\n"  # the target neither copied in nor written
    assert private.read_text() == "someone else's secret\n"
    with pytest.raises(IsADirectoryError):  # any other error is the caller's to see
        append_atomically(tmp_path, "x")


def test_a_link_at_a_name_the_report_writes_is_replaced_and_its_target_left_as_it_was(tmp_path):
    """The report once wrote runs.csv, table.csv and its figures through a link at their names."""
    from analysis.report import ReportContext, write_report
    from tests.analysis.runs_made import runs_frame

    out, elsewhere = tmp_path / "r", tmp_path / "elsewhere"
    (out / "figures").mkdir(parents=True)
    elsewhere.mkdir()
    names = ["runs.csv", "table.csv", "table.md", "report.html", "figures/metrics.png"]
    for name in names:
        target = elsewhere / name.replace("/", "-")
        target.write_text("not the report's\n")
        target.chmod(0o444)
        (out / name).symlink_to(target)
    write_report(runs_frame(), out, ReportContext(study="t", title="Test"))
    for name in names:
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name
        assert (elsewhere / name.replace("/", "-")).read_text() == "not the report's\n", name
    assert (out / "figures" / "metrics.png").read_bytes().startswith(b"\x89PNG")
    assert not list(out.rglob("*.part"))

    (out / "figures").rename(tmp_path / "old-figures")
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)  # a link at the figures' folder
    write_report(runs_frame(), out, ReportContext(study="t", title="Test"))
    assert not (out / "figures").is_symlink() and (out / "figures" / "metrics.png").is_file()
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted(n.replace("/", "-") for n in names)


def _whole(path, before: bytes) -> bool:
    """``path`` is its old bytes, or a whole new figure (an SVG carries the time it was drawn)."""
    after = path.read_bytes()
    ends = {".png": b"IEND\xaeB`\x82", ".svg": b"</svg>\n"}
    return after == before or (path.suffix in ends and after.endswith(ends[path.suffix]))


def test_a_report_written_into_a_full_disk_leaves_every_old_file_whole(tmp_path):
    """A write that fails half-way (here the file-size limit, as a full disk does) once cut a PNG and lost the old one."""
    import subprocess
    import sys

    from analysis.report import ReportContext, write_report
    from sweep.study.names import PROJECT_DIR
    from tests.analysis.runs_made import runs_frame

    out = tmp_path / "r"
    write_report(runs_frame(), out, ReportContext(study="t", title="Test"))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    limit = (out / "figures" / "metrics.png").stat().st_size // 2
    assert max(len(before[out / name]) for name in ("runs.csv", "table.csv", "table.md", "table.tex")) < limit  # the figure is cut
    script = (
        "import resource, sys\n"
        "from analysis.report import ReportContext, write_report\n"
        "from tests.analysis.runs_made import runs_frame\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        f"write_report(runs_frame(), {str(out)!r}, ReportContext(study='t', title='Test'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "File too large" in done.stderr, done.stderr[-2000:]
    assert {p for p in out.rglob("*") if p.is_file()} == set(before)  # nothing torn, nothing left aside
    assert [p.name for p, old in before.items() if not _whole(p, old)] == []


def test_a_report_killed_while_writing_runs_csv_leaves_the_old_one_whole_and_nothing_aside(tmp_path):
    """SIGKILL at the moment of writing once left runs.csv at 0 bytes (3 of 3)."""
    import signal
    import subprocess
    import sys

    from analysis.report import ReportContext, write_report
    from sweep.study.names import PROJECT_DIR
    from tests.analysis.runs_made import runs_frame

    out = tmp_path / "r"
    write_report(runs_frame(), out, ReportContext(study="t", title="Test"))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    script = (  # pandas writes half of runs.csv, says so, and waits to be killed
        "import sys\n"
        "import pandas as pd\n"
        "from analysis.report import ReportContext, write_report\n"
        "from tests.analysis.runs_made import runs_frame\n"
        "real = pd.DataFrame.to_csv\n"
        "def half(self, target, *args, **kwargs):\n"
        "    text = real(self, None, *args, **kwargs)\n"
        "    out = target if hasattr(target, 'write') else open(target, 'w')\n"
        "    out.write(text[: len(text) // 2]); out.flush()\n"
        "    print('writing', flush=True); sys.stdin.readline()\n"
        "pd.DataFrame.to_csv = half\n"
        f"write_report(runs_frame(), {str(out)!r}, ReportContext(study='t', title='Test'))\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], cwd=PROJECT_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "writing\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_file_made_aside_is_published_whole_over_what_killed_makers_left_and_never_over_a_file(tmp_path):
    from trainables.written import made_aside

    folder = tmp_path
    path = folder / "store.db"
    boot, namespace, pid, started = identity().split(".")
    dead = f"{boot}.{namespace}.{2**22 + 1}.1"  # a pid above Linux's pid_max: no process has it
    (folder / f".store.db.{dead}.creating-journal").write_bytes(b"a dead maker's journal")
    (folder / f".store.db.{boot}.{namespace}.{pid}.{int(started) + 1}.creating").write_bytes(b"cut short")  # this pid, a maker before
    elsewhere = f".store.db.{'0' * 32}.{namespace}.{2**22 + 1}.1.creating"  # another machine's, on a folder both share
    (folder / elsewhere).write_bytes(b"still making")
    with made_aside(path) as aside, open(aside, "ab") as out:
        assert aside.name == f".store.db.{identity()}.creating"
        out.write(b"whole")
    assert path.read_bytes() == b"whole"
    assert sorted(p.name for p in folder.iterdir()) == [elsewhere, "store.db"]
    with made_aside(path) as aside:  # a file that appeared meanwhile is kept
        aside.write_bytes(b"second")
    assert path.read_bytes() == b"whole" and sorted(p.name for p in folder.iterdir()) == [elsewhere, "store.db"]
