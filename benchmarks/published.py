"""Where a benchmark's table goes: to the console, and to the end of the Markdown file that
``--out`` names (BENCHMARKS.md), added whole or not at all: a benchmark killed while it writes, or
one that meets a full disk, leaves the file as it was (``append_atomically``)."""

from __future__ import annotations

from trainables.written import append_atomically


def publish(path: str | None, text: str) -> None:
    """Print ``text``; when ``path`` is given, add it to that file after an empty line."""
    print(text)
    if path:
        append_atomically(path, "\n" + text)
