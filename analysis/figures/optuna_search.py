"""Optuna's own figures of a sweep: optimisation history and parameter importances, drawn by
``optuna.visualization.matplotlib`` from the study the sweep mirrored into ``optuna.db``."""

from __future__ import annotations

from typing import Any


def optuna_figures(storage_url: str, study_name: str) -> tuple[dict[str, Any], list[str]]:
    """``{file name: Figure}`` and notes on what could not be drawn (and why)."""
    import warnings

    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Target and region quantiles")
        return _draw(storage_url, study_name)


def _draw(storage_url: str, study_name: str) -> tuple[dict[str, Any], list[str]]:
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as ov

    plt.switch_backend("Agg")  # optuna draws with pyplot; no display here
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=storage_url)
    except KeyError:
        return {}, [f"no Optuna study {study_name!r} in {storage_url}"]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    figures: dict[str, Any] = {}
    notes: list[str] = []
    multi = len(study.directions) > 1
    if len(complete) < 2:
        return {}, [f"Optuna's figures need 2 complete trials; the study has {len(complete)}"]
    target = (lambda t: t.values[0]) if multi else None
    name = "first objective" if multi else None
    figures["optuna_history.png"] = ov.plot_optimization_history(study, target=target, target_name=name or "Objective Value").figure
    if any(len({str(t.params.get(p)) for t in complete}) > 1 for p in {p for t in complete for p in t.params}):
        try:
            figures["optuna_importances.png"] = ov.plot_param_importances(
                study, target=target, target_name=name or "Objective Value"
            ).figure
        except (ValueError, RuntimeError) as err:
            notes.append(f"parameter importances: {err}")
    else:
        notes.append("parameter importances need a parameter that takes two values")
    return figures, notes
