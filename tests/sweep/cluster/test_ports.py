"""The ports the platform chooses for its servers (sweep/cluster/ports.py): free, and from a band
the kernel never hands out (its ephemeral range) and Ray gives none of its workers."""

import socket

import pytest

from sweep.cluster.ports import RAY_WORKER_PORTS, band, ephemeral_ports, free_port
from trainables.errors import ConfigError


def listening(port: int) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_a_chosen_port_is_free_and_neither_the_kernels_nor_rays():
    kernel = ephemeral_ports()
    for _ in range(50):
        port = free_port()
        assert port not in kernel and port not in RAY_WORKER_PORTS and 1024 < port < 65536
        listening(port).close()  # free: a server can bind it


def test_the_band_lies_below_the_ephemeral_range_or_above_it_on_a_kernel_tuned_lower(tmp_path):
    assert band(range(32768, 61000)) == range(20000, 32768)  # Linux's default
    assert band(range(15000, 61000)) == range(61000, 65536)  # nothing between Ray's workers and the kernel's
    tuned = tmp_path / "ip_local_port_range"
    tuned.write_text("1024\t65000\n")
    assert ephemeral_ports(tuned) == range(1024, 65001)
    assert ephemeral_ports(tmp_path / "missing") == range(32768, 61000)


def a_free_port() -> int:
    """A port free now, not chosen by ``free_port`` (the kernel's)."""
    with listening(0) as s:
        return s.getsockname()[1]


def test_a_port_in_use_is_passed_over_and_a_band_with_none_free_is_one_error(monkeypatch):
    held = listening(a_free_port())
    port = held.getsockname()[1]
    other = a_free_port()
    draws = iter([port, port, other])  # the held port is drawn twice before a free one
    monkeypatch.setattr("random.SystemRandom.choice", lambda self, ports: next(draws))
    try:
        assert free_port() == other
        monkeypatch.setattr("random.SystemRandom.choice", lambda self, ports: port)
        with pytest.raises(ConfigError, match=rf"no free TCP port on 127.0.0.1 among 5 tried in {port}-{port}"):
            free_port(ports=range(port, port + 1), tries=5)
    finally:
        held.close()


def test_a_port_once_chosen_is_not_chosen_again_though_nothing_has_bound_it_yet(monkeypatch):
    # the twin chose its GCS port, then its MLflow gate's, both before Ray or the gate bound theirs:
    # the gate was given the GCS port and `ray start` failed
    chosen, other = free_port(), a_free_port()
    draws = iter([chosen, chosen, other])
    monkeypatch.setattr("random.SystemRandom.choice", lambda self, ports: next(draws))
    assert free_port() == other
    monkeypatch.undo()
    start = free_port()
    few = range(start, start + 1)  # one port, handed out already
    with pytest.raises(ConfigError, match=rf"no free TCP port on 127.0.0.1 among 3 tried in {start}-{start}"):
        free_port(ports=few, tries=3)
