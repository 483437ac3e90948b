"""What a run is, in a few words: the name of its MLflow run and its row in the console.

A sweep's trial is labelled by what the sweep chose for it (a Table 4 row as ``J jp_unk_dal_mlp``,
a preset by its label, continuous values as ``mask_ratio=0.213``) and its seed; a single
training by its model and Table 4 row. The words join with ``-`` (``J-jp_unk_dal_mlp-s1``), and
that one name is the run's everywhere: its MLflow run, the live view, `sweep status`, the end of
a sweep (the console once said ``J jp_unk_dal_mlp seed 1`` for the run `sweep status` and the
MLflow UI call ``J-jp_unk_dal_mlp-s1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mjp.config import TABLE4, table4_row
from trainables.config.schema import TrainConfig

SEED_KEY = "runtime.seed"


@dataclass(frozen=True)
class RunLabel:
    words: tuple[str, ...]
    seed: int

    @property
    def run_name(self) -> str:
        return "-".join((*self.words, f"s{self.seed}"))

    @property
    def display(self) -> str:
        """What the console calls the run: its run name, as `sweep status` and the MLflow UI do."""
        return self.run_name


def variant_words(variant: str) -> tuple[str, ...]:
    """``jp_unk_dal_mlp`` -> ``("J", "jp_unk_dal_mlp")``; ``custom`` stays one word."""
    return (table4_row(variant).letter, variant) if variant in TABLE4 else (variant,)


def _value(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def run_label(cfg: TrainConfig, params: Mapping[str, Any] | None = None, presets: Mapping[str, Any] | None = None) -> RunLabel:
    """The label of the run that trains ``cfg``; ``params``: what a sweep sampled for it."""
    sampled = {k: v for k, v in (params or {}).items() if k != SEED_KEY}
    short = [k.rsplit(".", 1)[-1] for k in sampled]
    words: list[str] = []
    for (key, value), name in zip(sampled.items(), short):
        if key == "mjp.variant":
            words += variant_words(cfg.variant)
        elif presets and key in presets:
            words.append(str(value))
        else:
            words.append(f"{name if short.count(name) == 1 else key}={_value(value)}")
    if not words:
        words = [cfg.model.name, *variant_words(cfg.variant)]
    return RunLabel(tuple(words), cfg.runtime.seed)
