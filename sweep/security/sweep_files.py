"""A sweep directory's files, read, written, listed and removed by their paths inside it, on a
local disk or at a pyarrow URI (``s3://``, ``gs://``): what the signatures and the last whole save
need. A local write is atomic (``write_atomically``); a remote one is one object put."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from trainables.written import write_atomically


def is_remote(experiment_dir: str) -> bool:
    return "://" in experiment_dir


def list_files(experiment_dir: str) -> set[str]:
    """Relative paths (``/``-separated) of the files below ``experiment_dir``; locally, links to
    files included and linked folders not entered (Tune reads nothing through ``ray_logs``, the one
    link the sweep makes)."""
    if is_remote(experiment_dir):
        import pyarrow.fs

        fs, path = pyarrow.fs.FileSystem.from_uri(experiment_dir)
        infos = fs.get_file_info(pyarrow.fs.FileSelector(path, recursive=True))
        return {info.path[len(path.rstrip("/")) + 1 :] for info in infos if info.type == pyarrow.fs.FileType.File}
    return set(local_files(experiment_dir))


def local_files(root: str) -> Iterable[str]:
    """``list_files`` of a local folder."""
    for folder, _, names in os.walk(root):
        for name in names:
            yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def read_file(experiment_dir: str, relpath: str) -> bytes:
    if not is_remote(experiment_dir):
        return Path(experiment_dir, relpath).read_bytes()
    import pyarrow.fs

    fs, path = pyarrow.fs.FileSystem.from_uri(experiment_dir)
    with fs.open_input_stream(f"{path.rstrip('/')}/{relpath}") as fh:
        return fh.read()


def write_file(experiment_dir: str, relpath: str, content: bytes) -> None:
    if not is_remote(experiment_dir):
        write_atomically(Path(experiment_dir, relpath), content)  # a killed writer leaves the old version
        return
    import pyarrow.fs

    fs, path = pyarrow.fs.FileSystem.from_uri(experiment_dir)
    with fs.open_output_stream(f"{path.rstrip('/')}/{relpath}") as fh:
        fh.write(content)


def remove_file(experiment_dir: str, relpath: str) -> None:
    if not is_remote(experiment_dir):
        Path(experiment_dir, relpath).unlink(missing_ok=True)
        return
    import pyarrow.fs

    fs, path = pyarrow.fs.FileSystem.from_uri(experiment_dir)
    fs.delete_file(f"{path.rstrip('/')}/{relpath}")
