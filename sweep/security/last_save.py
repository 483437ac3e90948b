"""The sweep's last whole save of Tune's state files at its top (``mjp_last_save.json``).

Tune saves its experiment into a local staging folder, then copies the folder into the sweep
directory file by file, each file made empty and then written. A driver that ends in the middle of
that copy (its Ray gone under it at a ``scancel``, a SIGKILL) can leave ``experiment_state-*.json``
or the searcher's state empty, and Tune cannot continue a sweep without them. So at each save,
after the staging folder is signed and before Tune's copy begins (``SweepSigner.get_state``), the
top-level files of that save are kept here in one write: atomic on a local disk (written aside and
renamed), one object on s3 or GCS. It is therefore never older than any state file beside it.

A resume that finds a state file at the top empty writes back every file of this save that differs
(``signatures.cut_copies``): one consistent save, as Tune wrote it. Nothing here is trusted: each
file put back must match a signature this sweep made for its path. The bundle is plain JSON (names
and base64 bytes); nothing in it is unpickled here.
"""

from __future__ import annotations

import base64
import binascii
import json

from sweep.security.sweep_files import read_file, write_file

LAST_SAVE = "mjp_last_save.json"


def keep_last_save(experiment_dir: str, contents: dict[str, bytes]) -> None:
    """Keep the top-level files of one save (path inside the sweep directory -> bytes; the files in
    trials' folders are left out: Tune writes those again) as the directory's last whole save."""
    top = {rel: base64.b64encode(content).decode() for rel, content in sorted(contents.items()) if "/" not in rel}
    if top:
        write_file(experiment_dir, LAST_SAVE, json.dumps({"files": top}).encode())


def last_save(experiment_dir: str) -> dict[str, bytes]:
    """The last whole save kept in ``experiment_dir``; empty when there is none (a sweep started
    before saves were kept) or it cannot be read as one."""
    try:
        files = json.loads(read_file(experiment_dir, LAST_SAVE))["files"]
        return {str(rel): base64.b64decode(text, validate=True) for rel, text in files.items() if "/" not in str(rel)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        return {}
