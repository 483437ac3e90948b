"""How every trial of one run makes its ``TrainConfig``: the one function that does it.

A sweep's driver asks for a trial's config many times (its resources, its label, the live view,
the pre-flight), and the trial's process once more: ``TrialRecipe.config`` builds each distinct
``params`` once per process and hands the same frozen ``TrainConfig`` back after that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from trainables.config.build import build_config
from trainables.config.overrides import expand_presets
from trainables.config.schema import TrainConfig

#: ``{space key: {label: {dotted key: value}}}``: a sampled label stands for the keys it sets
Presets = Mapping[str, Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True)
class TrialRecipe:
    """A trial's config is ``base_tree``, then ``extra`` (the command's ``--set``, and the tracking
    URI the run really writes to), then the trial's sampled ``params`` with each preset label
    expanded into the keys it sets. ``source`` names the run in a refusal ("study 'fashion'")."""

    base_tree: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)
    presets: Presets = field(default_factory=dict)
    source: str = "config"
    _built: dict[str, TrainConfig] = field(default_factory=dict, compare=False, repr=False)

    def config(self, params: Mapping[str, Any]) -> TrainConfig:
        """The ``TrainConfig`` of the trial that sampled ``params`` (``{}``: the run's base);
        ``ConfigError`` naming the run and its params when they do not make a valid config."""
        key = json.dumps(params, sort_keys=True, default=str)
        cfg = self._built.get(key)
        if cfg is None:
            overrides = {**self.extra, **expand_presets(dict(params), {k: dict(v) for k, v in self.presets.items()})}
            source = self.source + (f" with {dict(params)}" if params else "")
            cfg = self._built[key] = build_config(dict(self.base_tree), overrides, source=source)
        return cfg

    def writing_to(self, uri: str) -> TrialRecipe:
        """This recipe with ``tracking.uri`` set to the store its runs really write to (resolved,
        credentials already in the environment): what each trial logs as its config."""
        return replace(self, extra={**self.extra, "tracking.uri": uri}, _built={})

    def __getstate__(self) -> dict[str, Any]:  # Tune ships the recipe to each trial: not the driver's cache
        return {**self.__dict__, "_built": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
