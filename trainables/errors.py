"""Errors a user can fix by changing the input: one line naming the key, the value and what is allowed.

A leaf module (imports nothing of the project), so every layer can raise these and the CLI can
catch them without an import cycle.
"""

from __future__ import annotations

import errno


def _rebuilt(cls: type[BaseException], args: tuple, state: dict) -> BaseException:
    """An error unpickled without calling its ``__init__`` (see ``UserError.__reduce__``)."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


#: the most characters of a user's value an error message quotes; the rest is counted, not shown
SHOWN_CHARS = 60


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters: an error quotes what the
    user gave, and a 5 MB string or a huge list must not become a 5 MB message."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def one_line(message: str, limit: int = 2000) -> str:
    """``message`` on one line, at most ``limit`` characters (the CLI prints every refusal so)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else f"{text[: limit - 30]}... ({len(text):,} characters in all)"


class UserError(Exception):
    """Any error the user can fix by changing the input; the CLI prints ``error: <message>``.

    Picklable whatever its subclass's ``__init__`` takes (Ray sends a worker's error to the
    driver as a pickle): it is rebuilt from its message and attributes, not by calling
    ``__init__`` again with the message alone."""

    #: the command's exit status when this error ends it: 2, bad input refused before any work
    exit_code = 2

    def __reduce__(self) -> tuple:
        return _rebuilt, (type(self), self.args, dict(self.__dict__))


class ConfigError(UserError, ValueError):
    """A config or study that cannot run: the message names the key, the value and what is allowed."""


class DataError(UserError, ValueError):
    """The data a config asks for is missing or broken; the message says where and what to do."""


class DiskFullError(UserError):
    """A disk the command writes to (the MLflow store, checkpoints, logs) is full: the command
    failed after it started (exit status 1), the input was fine."""

    exit_code = 1


#: what SQLite (through SQLAlchemy and MLflow) and the OS say when a disk is full
_DISK_FULL_TEXTS = ("database or disk is full", "No space left on device")


def disk_full_reason(err: BaseException) -> str | None:
    """The one-line reason when ``err`` (or an error it was raised from) is a full disk; else None."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return f"{type(current).__name__}: {current.strerror or 'No space left on device'}"
        for text in _DISK_FULL_TEXTS:
            if text in str(current):
                return f"{type(current).__name__}: {text}"
        current = current.__cause__ or current.__context__
    return None
