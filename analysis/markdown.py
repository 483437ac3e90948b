"""Text for people: the one Markdown table writer, and a metric's value as the tables and the console
show it (a fraction as a percentage). No pandas: the CLI's light commands use it too."""

from __future__ import annotations

from collections.abc import Iterable

from mjp import keys


def markdown_table(headers: list[str], rows: Iterable[Iterable[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def is_fraction(key: str) -> bool:
    """Whether ``key`` holds a fraction that tables and the console show as a percentage."""
    name = key.split("/", 1)[-1]
    return (
        key.startswith(("val/top1", "val/top5", "pe/ev_"))
        or key
        in (
            keys.VAL_CONSISTENCY,
            keys.ROBUST_MCE_UNNORMALIZED,
            keys.ROBUST_IMAGENET_A_TOP1,
            keys.ROBUST_IMAGENET_A_AURRA,
            keys.ROBUST_IMAGENET_O_AUPR,
            keys.ROBUST_IMAGENET_R_TOP1,
            keys.ROBUST_CLEAN_ERR,
        )
        or (key.startswith("robust/") and name.endswith("_err"))
    )


def format_value(key: str, value: float | None) -> str:
    """``97.2%`` for fractions, ``4.95`` otherwise, ``-`` when missing."""
    if value is None or value != value:
        return "-"
    return f"{100 * value:.1f}%" if is_fraction(key) else f"{value:.3g}"
