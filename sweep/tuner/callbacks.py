"""The callbacks a sweep's driver attaches to Tune (recorder, signer, Optuna mirror, live view),
behind the one callback Tune keeps: ``SweepCallbacks``.

Tune pickles the callbacks of its ``RunConfig`` into the experiment (``tuner.pkl``), and
``Tuner.restore`` takes no new ``RunConfig``: a resumed sweep would run with inert copies of the
first driver's console and recorder. ``SweepCallbacks`` pickles as its sweep's name alone; in
whichever driver it is called, it forwards to the callbacks that driver attached for that sweep
(``attached``), so a run and a resume reach their own live view through Tune's public API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from ray import tune
from ray.tune.callback import CallbackList

from sweep.console.view import ConsoleView
from sweep.security.signing_callback import SweepSigner
from sweep.study.load import Study
from sweep.tuner.recorder import SweepRecorder
from sweep.tuner.state import SweepState
from sweep.tuner.storage import SweepPaths
from sweep.tuner.store_guard import StoreGuard
from trainables.launch.trial import TrialSpec
from trainables.tracking.progress import Progress
from trainables.tracking.runs import MlflowProgress

#: the callbacks each sweep of this driver attached, by sweep name (``attached``)
_ATTACHED: dict[str, list[tune.Callback]] = {}


class SweepCallbacks(CallbackList):
    """Tune's callback for sweep ``name``: forwards every hook (and ``get_state``, where the signer
    signs) to the callbacks attached for that sweep in this process; none while none are."""

    def __init__(self, name: str):
        self.name = name

    @property
    def _callbacks(self) -> list[tune.Callback]:  # read by every hook of CallbackList
        return _ATTACHED.get(self.name, [])

    @_callbacks.setter
    def _callbacks(self, callbacks: list[tune.Callback]) -> None:
        raise AttributeError("a sweep's callbacks are attached by its driver (`attached`), never stored in the experiment")

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name = state["name"]


@contextlib.contextmanager
def attached(name: str, callbacks: list[tune.Callback]) -> Iterator[SweepCallbacks]:
    """``callbacks`` receive sweep ``name``'s events for the ``with`` block; yields the callback to
    give a new ``RunConfig`` (a restored experiment already holds one of that name)."""
    _ATTACHED[name] = callbacks
    try:
        yield SweepCallbacks(name)
    finally:
        _ATTACHED.pop(name, None)


def guarded(guard: StoreGuard, progress: MlflowProgress) -> Callable[[str], Progress | None]:
    """The live view's reads of a trial's progress, none once the store was lost (an MLflow client
    opening a missing SQLite file makes a new, empty store there)."""
    return lambda trial_id: progress(trial_id) if guard.holds() else None


def store_guard(spec: TrialSpec, paths: SweepPaths) -> StoreGuard:
    """The guard of a sweep's store, whose one line names the resume of this sweep."""
    return StoreGuard(spec.uri, f"`mjp sweep resume {paths.experiment_dir}` continues the sweep")


def sweep_callbacks(
    study: Study,
    spec: TrialSpec,
    state: SweepState,
    paths: SweepPaths,
    recorder: SweepRecorder,
    guard: StoreGuard,
    stream: TextIO | None,
) -> list[tune.Callback]:
    """What a sweep's driver attaches, in the order Tune calls them: the store's ``guard`` (a lost or
    full store ends the sweep), the recorder (MLflow statuses), the signer, the Optuna mirror (where the store has one), the live view."""
    epochs = study.base.optim.epochs
    recorder.epochs = epochs
    recorder.guard = guard
    callbacks: list[tune.Callback] = [guard, recorder, SweepSigner(paths.experiment_dir, paths.name)]
    if state.optuna_storage:
        from sweep.tuner.optuna_mirror import OptunaMirror

        tracking = (state.uri, state.experiment, state.parent_run_id)
        callbacks.append(OptunaMirror(state.optuna_storage, state.name, study.config, epochs, tracking=tracking))
    view = ConsoleView(
        f"sweep {spec.name}",
        lambda p: spec.label(p).display,
        lambda p: spec.recipe.config(p).optim.epochs,
        [(o.metric, o.mode) for o in study.config.objectives],
        study.num_trials,
        stream=stream,
        progress_of=guarded(guard, MlflowProgress(spec.uri, spec.experiment, spec.parent_run_id)),
    )
    return [*callbacks, view]
