"""Credentials in a tracking URI (``http://user:password@host:5000``) never reach a record: the
console, an MLflow param or tag, a sweep's files (``mjp_sweep.json``, Tune's pickles) or a report.

A tracking server's user and password move, as soon as a command sees them (``--uri``, ``--set
tracking.uri=...``, ``$MLFLOW_TRACKING_URI``), into the variables MLflow's client reads for HTTP
basic authentication, ``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``, and the URI
goes on without them: the one the sweep records, prints and pickles names the server only. The
Ray processes a command starts inherit the variables; a resume takes them from the environment
again (docs/security.md). A database store's password cannot move (MLflow reads none from the
environment) and is refused in one line. ``redact`` is the last guard where text is recorded.
No MLflow import: the CLI calls this before any command runs.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

from trainables.errors import ConfigError

USERNAME, PASSWORD = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"

#: the user-info part of any URL in a text: ``scheme://user[:password]@``, up to the last ``@``
#: before the path (a password may hold a raw ``@``: ``http://u:p@ss@host``)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/\s'\"]+)@")


def redact(text: str) -> str:
    """``text`` with the user info of every URL in it replaced: ``http://***@host:5000``."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}***@", text)


def has_credentials(text: str) -> bool:
    return _USERINFO.search(text) is not None


def without_credentials(uri: str) -> str:
    """``uri`` without its user info; a tracking server's user and password are moved into
    ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` for MLflow's client (and the Ray
    processes started after this) to authenticate with. A database URI with a password is refused."""
    match = _USERINFO.match(uri)
    if match is None:
        return uri
    scheme = match["scheme"][:-3].lower()
    user, _, password = match["info"].partition(":")
    if scheme not in ("http", "https"):
        if not password:
            return uri  # a database user alone is no secret
        raise ConfigError(
            f"tracking URI {redact(uri)}: a database password in the URI would be recorded with every run; give it to the "
            "database client instead (PostgreSQL: ~/.pgpass or $PGPASSWORD; MySQL: an option file) and drop it from the URI"
        )
    os.environ[USERNAME] = unquote(user)
    if password:
        os.environ[PASSWORD] = unquote(password)
    return match["scheme"] + uri[match.end() :]


def scrub_environment() -> None:
    """``$MLFLOW_TRACKING_URI`` without credentials (they move as ``without_credentials`` moves
    them), before anything reads, prints or passes on the variable."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri and has_credentials(uri):
        os.environ["MLFLOW_TRACKING_URI"] = without_credentials(uri)


def scrub_overrides(sets: list[str]) -> list[str]:
    """``--set`` values of the tracking section (``tracking.uri=http://u:p@host``, or a
    ``tracking=`` mapping holding one) without credentials, which move as ``without_credentials``
    moves them. Other keys are left as given (``redact`` guards what is recorded)."""

    def moved(match: re.Match) -> str:
        without_credentials(match[0] + "host")  # moves them (or refuses a database password)
        return match["scheme"]

    return [_USERINFO.sub(moved, item) if item.split("=", 1)[0].strip() in ("tracking.uri", "tracking") else item for item in sets]
