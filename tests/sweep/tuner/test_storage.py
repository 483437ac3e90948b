"""A sweep's files: the link to Ray's logs follows the driver that runs the sweep now."""

from pathlib import Path

import sweep.tuner.storage as storage


def test_a_resume_relinks_ray_logs_whose_session_is_gone(tmp_path, monkeypatch):
    """A resume on another node (a requeued Slurm job, a new twin) finds the link of the first
    driver's Ray session, whose folder went with its node: the link is made anew, not refused."""
    sweep_dir, old, new = tmp_path / "sweep", tmp_path / "old-session" / "logs", tmp_path / "new-session" / "logs"
    sweep_dir.mkdir()
    new.mkdir(parents=True)
    (sweep_dir / "ray_logs").symlink_to(old, target_is_directory=True)  # dangling: the old session is gone
    monkeypatch.setattr(storage, "ray_session_logs", lambda: new)
    storage.link_ray_logs(str(sweep_dir))
    assert Path(sweep_dir / "ray_logs").resolve() == new.resolve()
    storage.link_ray_logs(str(sweep_dir))  # the same driver again: unchanged
    assert Path(sweep_dir / "ray_logs").resolve() == new.resolve()
