"""``mjp cluster probe``'s checks on one node, each held and each failed as a broken node fails it;
on the local twin the probe runs as a job (tests/test_cluster_local.py)."""

import socket

import numpy as np
from PIL import Image

from sweep.cli import main
from sweep.cluster.probe import _bucket, _images, _tracking, probe_here


def image_folder(root):
    for c in ("n01", "n02"):
        (root / "train" / c).mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "train" / c / "a.JPEG")
    return root


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_node_with_the_images_and_the_bucket_passes_and_says_what_it_saw(tmp_path, monkeypatch):
    import ray

    was_running = ray.is_initialized()  # another test in this process may have started the shared Ray

    def no_ray(*_, **__):
        raise AssertionError("probing outside a Ray task starts no Ray (a later test would inherit it)")

    monkeypatch.setattr(ray, "init", no_ray)
    node, checks = probe_here(str(image_folder(tmp_path / "images")), str(tmp_path / "bucket"), None, cuda=False)
    seen = {c.name: c for c in checks}
    assert seen["images"].ok and "2 classes, n01/a.JPEG decodes" in seen["images"].detail
    assert seen["bucket"].ok and not list((tmp_path / "bucket" / "_probe").iterdir()), "the probe's file is deleted"
    assert not seen["mlflow"].ok and "not the head's MLflow server" in seen["mlflow"].detail
    assert "cuda" not in seen and node
    assert ray.is_initialized() == was_running, "probing outside a Ray task starts no Ray (a later test would inherit it)"


def test_what_a_broken_node_fails(tmp_path):
    assert "no class folders" in _images(str(tmp_path / "none")).detail
    (tmp_path / "broken" / "train" / "n01").mkdir(parents=True)
    (tmp_path / "broken" / "train" / "n01" / "a.JPEG").write_bytes(b"not a jpeg")
    assert "does not decode" in _images(str(tmp_path / "broken")).detail
    assert not _bucket(None).ok and "MJP_SWEEP_STORAGE is not set" in _bucket(None).detail
    (tmp_path / "file").write_text("a file where the bucket's folder should be")
    assert not _bucket(str(tmp_path / "file")).ok
    down = _tracking(f"http://127.0.0.1:{closed_port()}")
    assert not down.ok and "does not answer from this node" in down.detail


def test_the_probe_refuses_to_run_off_a_cluster(monkeypatch, capsys):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["cluster", "probe"]) == 2
    assert "submit it as a Ray job" in capsys.readouterr().err
