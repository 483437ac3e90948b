"""What a Slurm job asks for: Slurm's time forms, GPUs in sinfo's GRES field, a shape against a partition."""

import pytest

from sweep.cluster.slurm.shape import NodeGroup, SlurmShape, check_fits, gpus_in, time_limit_s
from trainables.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 1800), ("1:30", 90), ("4:00:00", 14400), ("2-12", 216000), ("1-00:30", 88200), ("1-00:00:05", 86405)],
)
def test_slurm_time_forms(text, seconds):
    assert time_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "soon", "1:2:3:4", "-5", "UNLIMITED", "1-"])
def test_a_time_slurm_would_not_take_is_refused_naming_the_forms(text):
    with pytest.raises(ConfigError, match="allowed are Slurm's forms"):
        time_limit_s(text)


@pytest.mark.parametrize(
    ("gres", "gpus"), [("(null)", 0), ("gpu:8", 8), ("gpu:a100:4(S:0-1)", 4), ("gpu:a100:2,gpu:v100:2", 4), ("shard:8", 0)]
)
def test_gpus_in_sinfo_gres(gres, gpus):
    assert gpus_in(gres) == gpus


def shape(**kw):
    base = {"nodes": 2, "gpus_per_node": 8, "cpus_per_node": 64, "partition": "gpu", "time": "24:00:00"}
    return SlurmShape(**{**base, **kw})


def test_a_shape_fits_where_enough_nodes_have_its_cpus_and_gpus():
    check_fits(shape(), [NodeGroup(1, 96, 8), NodeGroup(3, 64, 4), NodeGroup(1, 128, 8)])
    with pytest.raises(ConfigError, match=r"--nodes 3 .* partition gpu has 2 such nodes \(its nodes: 1 x \(96 CPUs, 8 GPUs\)"):
        check_fits(shape(nodes=3), [NodeGroup(1, 96, 8), NodeGroup(3, 64, 4), NodeGroup(1, 128, 8)])


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"nodes": 0}, "--nodes 0: allowed is 1 or more"),
        ({"gpus_per_node": -1}, "--gpus-per-node -1"),
        ({"cpus_per_node": 0}, "--cpus-per-node 0"),
        ({"partition": "gpu;rm -rf"}, "--partition 'gpu;rm -rf'"),
        ({"account": "a b"}, "--account 'a b'"),
        ({"mem": "lots"}, "--mem 'lots'"),
        ({"time": "5", "signal_lead_s": 180}, "--time 5 (300 s) leaves no time to train"),
        ({"signal_lead_s": 5}, "--signal-lead 5"),
    ],
)
def test_a_bad_shape_says_which_value_and_what_is_allowed(kw, says):
    with pytest.raises(ConfigError, match=None) as err:
        shape(**kw)
    assert says in str(err.value)


def fake_sinfo(tmp_path, monkeypatch, line: str) -> None:
    """A ``sinfo`` on PATH that writes ``line`` to stderr, then never ends."""
    import os

    never = tmp_path / "never-written"
    os.mkfifo(never)  # opening it for reading waits for a writer that never comes
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(f"#!/bin/sh\necho '{line}' >&2\nexec cat {never}\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def test_a_sinfo_that_does_not_answer_is_one_line_with_what_it_said(tmp_path, monkeypatch):
    """A sinfo that never ends: past the limit it is SlurmUnreachable naming its first words, not a
    subprocess traceback."""
    from sweep.cluster.slurm.shape import SlurmUnreachable, partition_nodes

    fake_sinfo(tmp_path, monkeypatch, "sinfo: error: Unable to contact slurm controller (connect failure)")
    with pytest.raises(SlurmUnreachable) as err:
        partition_nodes("debug", seconds=1)
    said = "sinfo: error: Unable to contact slurm controller (connect failure)"
    assert str(err.value) == f"`sinfo -p debug` failed: no answer in 1 s ({said})"


def test_a_sinfo_without_a_slurm_conf_is_one_line_at_once_not_after_its_minute_of_retries(tmp_path, monkeypatch):
    """sinfo retries a missing slurm.conf for a minute: its first line says so, and that line is the
    answer (the limit here is far longer than the test's own timeout: only the line can end it)."""
    from sweep.cluster.slurm.shape import SlurmUnreachable, partition_nodes

    said = "sinfo: error: s_p_parse_file: cannot stat file /etc/slurm/slurm.conf: No such file or directory, retrying in 1sec up to 60sec"
    fake_sinfo(tmp_path, monkeypatch, said)
    with pytest.raises(SlurmUnreachable) as err:
        partition_nodes("debug", seconds=3600)
    assert str(err.value) == f"`sinfo -p debug` failed: {said}"
