"""Signatures of the files in a sweep directory that Ray Tune unpickles on resume.

``Tuner.restore`` unpickles ``tuner.pkl``, the searcher and search-generator state and the
callback state, and expands cloudpickle blobs embedded in ``experiment_state-*.json``; a trial's
``error.pkl`` is unpickled when its error is read. Anyone who can put a file into a sweep
directory (a shared disk, a downloaded archive) could therefore run code on ``mjp sweep resume``.

So every such file the sweep writes is signed with a keyed digest (HMAC-SHA256) whose key lives
outside the directory, readable by this user only (``$MJP_HOME/sweep-signing.key``, default
``~/.config/mjp/``, created on first use with mode 0600). The signatures are kept in the sweep
directory (``mjp_signatures``, a name Tune never copies or reads), and ``verify_sweep_dir``
refuses a directory before Ray opens anything when any ``*.pkl`` below it, or any Tune state
file at its top, is unsigned or changed, or the manifest is missing or not made with this key.

A file's signature binds its path inside the directory to its content. The manifest keeps the
last few signatures of each path, so a file that Tune was still copying when the driver was
killed verifies in either its old or its new version (both were written by this sweep), or is
empty (made, not yet written: it runs nothing). ``cut_copies`` says how a resume mends those: a
trial's empty file is removed, and an empty state file at the top is written back, with the rest of
its save, from the sweep's last whole save (``last_save``), every file checked against its signature.
This module imports neither Ray nor torch: it runs before either is loaded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sweep.security.last_save import LAST_SAVE, last_save
from sweep.security.sweep_files import list_files, local_files, read_file, write_file
from trainables.errors import UserError

MANIFEST = "mjp_signatures"
KEY_FILE = "sweep-signing.key"
#: The sweep's own plain-JSON state (read with ``json.loads``, never unpickled, but signed: a
#: resume follows it, so an edited study, overrides, tracking URI or Optuna storage is refused).
STATE_FILE = "mjp_sweep.json"
OWN_FILES = frozenset({STATE_FILE, MANIFEST, LAST_SAVE})
#: How many signatures of one path are kept (old versions a killed sync may have left).
HISTORY = 16


def key_path() -> Path:
    """``$MJP_HOME/sweep-signing.key``, else ``~/.config/mjp/sweep-signing.key``."""
    home = os.environ.get("MJP_HOME")
    return Path(home).expanduser() / KEY_FILE if home else Path.home() / ".config" / "mjp" / KEY_FILE


def signing_key(create: bool) -> bytes | None:
    """This user's signing key; created (0600, in a 0700 folder) when ``create`` and absent.
    A key file that others can read or write is refused: its signatures prove nothing."""
    path = key_path()
    if not path.exists():
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another sweep made it a moment ago
            return signing_key(create=False)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(
            f"the sweep signing key {path} is accessible to other users (mode {stat.S_IMODE(mode):o}); allowed: only you (chmod 600 {path})"
        )
    key = path.read_bytes()
    if len(key) < 32:
        raise UserError(
            f"the sweep signing key {path} is truncated ({len(key)} bytes, 32 expected); "
            f"delete it to make a new one (sweeps signed with it will no longer resume)"
        )
    return key


def _file_mac(key: bytes, relpath: str, content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()
    return hmac.new(key, f"file\0{relpath}\0{digest}".encode(), hashlib.sha256).hexdigest()


def _manifest_mac(key: bytes, files: dict[str, list[str]]) -> str:
    return hmac.new(key, b"manifest\0" + json.dumps(files, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def is_unpickled_by_tune(relpath: str) -> bool:
    """Whether Tune may unpickle this file of a sweep directory: every ``*.pkl`` at any depth,
    and the JSON state files at its top (``experiment_state-*.json`` embeds cloudpickle;
    ``search_gen_state-*.json`` is a pickle despite its name)."""
    name = relpath.rsplit("/", 1)[-1]
    if name in OWN_FILES:
        return False
    return name.endswith(".pkl") or ("/" not in relpath and name.endswith(".json"))


def must_be_signed(relpath: str) -> bool:
    """Whether a resume refuses this file of a sweep directory unsigned or changed: what Tune
    may unpickle, and the sweep's own state file at its top."""
    return relpath == STATE_FILE or is_unpickled_by_tune(relpath)


def _load_manifest(experiment_dir: str, key: bytes) -> dict[str, list[str]]:
    try:
        data = json.loads(read_file(experiment_dir, MANIFEST))
        files, mac = data["files"], data["mac"]
    except (FileNotFoundError, OSError):
        raise UserError(
            f"refusing to resume {experiment_dir}: it has no signature manifest ({MANIFEST}); "
            f"only a sweep directory this platform wrote for you resumes"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise UserError(f"refusing to resume {experiment_dir}: its signature manifest {MANIFEST} is unreadable") from None
    if not isinstance(files, dict) or not isinstance(mac, str) or not hmac.compare_digest(mac, _manifest_mac(key, files)):
        raise UserError(
            f"refusing to resume {experiment_dir}: its signature manifest {MANIFEST} was not made with your signing key {key_path()} "
            f"(forged, or another user's sweep)"
        )
    return files


def sign_files(experiment_dir: str, contents: dict[str, bytes]) -> None:
    """Add the signatures of ``contents`` (path inside the sweep directory -> bytes) to the
    directory's manifest, keeping the last ``HISTORY`` signatures of each path."""
    if not contents:
        return
    key = signing_key(create=True)
    assert key is not None
    try:
        files = _load_manifest(experiment_dir, key)
    except UserError:
        files = {}  # no manifest yet (the sweep's first save), or one we cannot vouch for: start anew
    for relpath, content in contents.items():
        mac = _file_mac(key, relpath, content)
        history = [m for m in files.get(relpath, []) if m != mac]
        files[relpath] = (history + [mac])[-HISTORY:]
    write_file(experiment_dir, MANIFEST, json.dumps({"files": files, "mac": _manifest_mac(key, files)}, sort_keys=True).encode())


def sign_tree(experiment_dir: str, source_dir: str) -> dict[str, bytes]:
    """Sign the files Tune may unpickle in ``source_dir`` (Tune's staging copy of the sweep
    directory, which it is about to copy there) under their paths in ``experiment_dir``; returns
    what was signed (path -> bytes)."""
    contents = {}
    for rel in local_files(source_dir):
        if is_unpickled_by_tune(rel):
            try:
                contents[rel] = Path(source_dir, rel).read_bytes()
            except OSError:
                continue  # replaced while we listed it; the next save signs it
    sign_files(experiment_dir, contents)
    return contents


def verify_sweep_dir(experiment_dir: str) -> None:
    """Refuse (``UserError``, one line naming the file) a sweep directory where a file Tune
    may unpickle is unsigned or changed, or whose manifest is missing or not made with this
    user's key. Reads bytes only: nothing in the directory is unpickled here. What a driver ended
    mid-copy left empty passes where ``cut_copies`` can mend it."""
    cut_copies(experiment_dir)


@dataclass(frozen=True)
class CutCopies:
    """What a driver that ended in the middle of Tune's copy left, and how a resume mends it.

    ``emptied``: files of trials, empty where this sweep signed a file; removed, Tune writes
    them again. ``restored``: when a state file at the top is empty, every top-level file of the
    sweep's last whole save (``last_save``) that differs from what is there, to write back."""

    emptied: list[str] = field(default_factory=list)
    restored: dict[str, bytes] = field(default_factory=dict)

    def said(self) -> list[str]:
        """What a resume mended, one console line each (none when nothing was cut)."""

        def named(paths: list[str]) -> str:
            return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")

        lines = []
        if self.restored:
            lines.append(f"put back {len(self.restored)} state file(s) from its last whole save: {named(sorted(self.restored))}")
        if self.emptied:
            lines.append(f"removed {len(self.emptied)} empty file(s) its driver's last copy left: {named(self.emptied)}")
        return lines


def cut_copies(experiment_dir: str) -> CutCopies:
    """``verify_sweep_dir``'s checks, and what a resume writes or removes before Tune reads the
    directory. Tune copies each save into it file by file (each made empty, then written); a
    driver that ended in the middle of a copy (its Ray gone under it at a ``scancel``) left some
    empty. A state file at the top left empty, with no whole save kept that this sweep signed, is
    refused: Tune cannot continue without it."""
    key = signing_key(create=False)
    if key is None:
        raise UserError(
            f"refusing to resume {experiment_dir}: you have no sweep signing key ({key_path()}), "
            f"so no sweep directory was signed for you on this machine"
        )
    files = _load_manifest(experiment_dir, key)
    listing = list_files(experiment_dir)
    if STATE_FILE not in listing:
        raise UserError(f"refusing to resume {experiment_dir}: it has no {STATE_FILE}; pass the directory `mjp sweep run` printed")
    if not files.get(STATE_FILE):
        raise UserError(
            f"refusing to resume {experiment_dir}: its state file {STATE_FILE} is not signed "
            f"(a sweep started before state files were signed, or one not written for you); start the sweep again"
        )
    cut = CutCopies()
    top: dict[str, bytes] = {}  # the state files at the top, as they are
    for rel in sorted(listing):
        if not must_be_signed(rel):
            continue
        known = files.get(rel)
        if not known:
            raise UserError(
                f"refusing to resume {experiment_dir}: {rel} was not written by this sweep (unsigned); "
                f"Tune would unpickle it, which can run code. Remove it if you trust nothing in it"
            )
        content = read_file(experiment_dir, rel)
        if "/" not in rel:
            top[rel] = content
        if not content and rel != STATE_FILE:
            if "/" in rel:
                cut.emptied.append(rel)  # a trial's file, which Tune writes again
            continue
        if _file_mac(key, rel, content) not in known:
            hint = "put back the original or start the sweep again" if rel == STATE_FILE else "Tune would unpickle it, which can run code"
            raise UserError(
                f"refusing to resume {experiment_dir}: {rel} was changed after this sweep wrote it (its signature does not match); {hint}"
            )
    empty = sorted(rel for rel, content in top.items() if not content)
    if empty:
        cut.restored.update(_from_last_save(experiment_dir, key, files, empty, top))
    return cut


def _from_last_save(
    experiment_dir: str, key: bytes, files: dict[str, list[str]], empty: list[str], top: dict[str, bytes]
) -> dict[str, bytes]:
    """The files of the last whole save that differ from ``top``, each checked against this sweep's
    signatures; refused in one line when the save lacks an ``empty`` file or holds one unsigned."""
    saved = last_save(experiment_dir)
    lacking = [rel for rel in empty if rel not in saved]
    if lacking:
        raise UserError(
            f"refusing to resume {experiment_dir}: Tune's state file {lacking[0]} is empty (its driver ended while Tune copied "
            "it in), and Tune cannot continue the sweep without it; start the sweep again with `mjp sweep run`"
        )
    for rel, content in saved.items():
        if _file_mac(key, rel, content) not in files.get(rel, []):
            raise UserError(
                f"refusing to resume {experiment_dir}: its last whole save ({LAST_SAVE}) holds a {rel} this sweep did not sign; "
                f"Tune would unpickle it, which can run code. Start the sweep again with `mjp sweep run`"
            )
    return {rel: content for rel, content in saved.items() if top.get(rel) != content}
