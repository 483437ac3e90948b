"""AWS keys out of the environment before Ray sees them.

Ray Tune copies ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and the session token from the
driver's environment into every trial's ``runtime_env`` (``ray.tune.execution.class_cache``), and
Ray's runtime-env agent writes each runtime env into its log, readable by every user of the
machine (and linked from the sweep's directory as ``ray_logs``). A command that finds the keys in
its environment moves them into a credentials file only this user can read, which ends with the
process (``process_secrets``: a memory file named by ``/proc/<pid>/fd/<fd>``, nothing on disk,
nothing left after a SIGKILL), and points ``AWS_SHARED_CREDENTIALS_FILE`` at it: boto3 and
pyarrow's S3 read it there, in this process and in every Ray process it starts, and the keys are
in no environment, no log and no file that outlives the command. (On
``cluster.yaml``'s nodes there are no keys: their instance profiles answer.)
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from trainables.launch.process_secrets import process_secret_file

#: the variables Tune passes on to its trials, in the order a credentials file names them
KEYS = {
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token",
}


def keys_to_private_file() -> Path | None:
    """Move the AWS keys of this process' environment into a private credentials file (mode 0600,
    ``process_secret_file``: it ends with this process, however it ends); the file, or None when
    there were none.
    ``AWS_SECURITY_TOKEN`` (the older name of the session token) leaves with them."""
    found = {name: os.environ[name] for name in KEYS if os.environ.get(name)}
    legacy = os.environ.pop("AWS_SECURITY_TOKEN", None)
    if legacy and "AWS_SESSION_TOKEN" not in found:
        found["AWS_SESSION_TOKEN"] = legacy
    if not found:
        return None
    profile = os.environ.get("AWS_PROFILE") or "default"
    text = f"[{profile}]\n" + "".join(f"{KEYS[name]} = {value}\n" for name, value in found.items())
    path = process_secret_file("aws-credentials", text) or _file_removed_at_exit(text)
    for name in found:
        os.environ.pop(name, None)
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(path)
    return path


def _file_removed_at_exit(text: str) -> Path:
    """Where no process secret file can be made: ``text`` in a 0600 file in a 0700 directory,
    removed at exit (a SIGKILL leaves it behind)."""
    directory = Path(tempfile.mkdtemp(prefix="mjp-aws-"))  # 0700
    path = directory / "credentials"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    atexit.register(shutil.rmtree, directory, True)
    return path
