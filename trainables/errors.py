"""Errors a user can fix by changing the input: one line naming the key, the value and what is allowed.

A leaf module (imports nothing of the project), so every layer can raise these and the CLI can
catch them without an import cycle.
"""

from __future__ import annotations


class UserError(Exception):
    """Any error the user can fix by changing the input; the CLI prints ``error: <message>``."""


class ConfigError(UserError, ValueError):
    """A config or study that cannot run: the message names the key, the value and what is allowed."""


class DataError(UserError, ValueError):
    """The data a config asks for is missing or broken; the message says where and what to do."""
