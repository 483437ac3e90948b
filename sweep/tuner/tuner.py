"""The pieces of the Tune experiment for a study: the trainable and its resources, Optuna's
searcher behind a concurrency limit, the ASHA or FIFO scheduler, the failure policy and the
checks a launch makes first (the callbacks a run and a resume attach: ``callbacks.py``)."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch

from mjp import keys
from sweep.study.load import Study
from sweep.study.space import define_by_run, make_sampler
from sweep.tuner.state import SweepState
from sweep.tuner.storage import SweepPaths
from trainables.config.schema import TrainConfig
from trainables.errors import UserError
from trainables.launch.ray_runtime import check_local_resources, require_cluster
from trainables.launch.trial import TrialResources, TrialSpec, tune_trial


def asha_rungs(study: Study) -> tuple[int, ...]:
    """The epochs at which ASHA decides (grace period x reduction factor^k, up to the last epoch)."""
    s = study.config.scheduler
    if s.type != "asha":
        return ()
    last, rungs, t = study.base.optim.epochs, [], float(s.grace_period)
    while t < last:
        rungs.append(int(round(t)))
        t *= s.reduction_factor
    return tuple(rungs)


def uses_ray_train(study: Study) -> bool:
    """Whether trials run as multi-worker ``TorchTrainer`` runs (checked on the base config and
    every combination the pre-flight checks)."""
    return any(not study.recipe.config(p).scaling.in_process for p in [{}, *study.combinations()])


def cpus_needed(study: Study) -> int:
    s = study.base.scaling
    per_trial = s.cpus_per_worker if s.in_process else study.config.driver_cpus + s.num_workers * s.cpus_per_worker
    return max(os.cpu_count() or 1, math.ceil(study.max_concurrent * per_trial))


def trial_spec(study: Study, state: SweepState, paths: SweepPaths) -> TrialSpec:
    """What every trial of the sweep shares; each trial's config records the store it writes to."""
    return TrialSpec(
        name=state.name,
        recipe=study.recipe.writing_to(state.uri),
        uri=state.uri,
        experiment=state.experiment,
        storage=paths.trials_dir,
        study=study.name,
        parent_run_id=state.parent_run_id,
        checkpoint_epochs=asha_rungs(study),
        driver_cpus=study.config.driver_cpus,
    )


def _searcher(study: Study) -> Any:
    """Optuna's sampler behind Tune; its state is pickled with the experiment (see optuna_mirror)."""
    c = study.config
    objectives = c.objectives
    searcher = OptunaSearch(
        space=define_by_run(c),
        metric=[o.metric for o in objectives] if len(objectives) > 1 else objectives[0].metric,
        mode=[o.mode for o in objectives] if len(objectives) > 1 else objectives[0].mode,
        sampler=make_sampler(c),
    )
    return ConcurrencyLimiter(searcher, max_concurrent=study.max_concurrent)


@contextlib.contextmanager
def objectives_checked_at_the_end(study: Study) -> Iterator[None]:
    """Tune refuses every result that lacks one of the searcher's metrics, but val/consistency,
    val/diff_norm and the other metrics of the final evaluation come with a trial's last epoch
    only. With several objectives Optuna reads them from that final result alone (NSGA-II takes no
    intermediate values), so while such a study's trials run Tune's per-epoch check is off."""
    objectives = study.config.objectives
    if len(objectives) < 2 or all(o.metric in keys.EPOCH_METRICS for o in objectives):
        yield
        return
    name = "TUNE_DISABLE_STRICT_METRIC_CHECKING"
    before = os.environ.get(name)
    os.environ[name] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def make_scheduler(study: Study) -> FIFOScheduler | ASHAScheduler:
    """Tune's trial scheduler for the study (ASHA's ``max_t``: the trials' epochs)."""
    c = study.config
    objectives = c.objectives
    if c.scheduler.type == "asha":
        return ASHAScheduler(
            metric=c.scheduler.metric or objectives[0].metric,
            mode=c.scheduler.mode or objectives[0].mode,
            time_attr="training_iteration",
            grace_period=c.scheduler.grace_period,
            reduction_factor=c.scheduler.reduction_factor,
            max_t=study.base.optim.epochs,
        )
    return FIFOScheduler()


def tuner_parts(study: Study, spec: TrialSpec) -> tuple[Any, tune.TuneConfig]:
    c = study.config
    objectives = c.objectives
    scheduler = make_scheduler(study)
    # Tune refuses a metric given to both the scheduler and the TuneConfig: ASHA keeps its own.
    single = len(objectives) == 1 and c.scheduler.type != "asha"
    tune_config = tune.TuneConfig(
        search_alg=_searcher(study),
        scheduler=scheduler,
        num_samples=study.num_trials,
        time_budget_s=c.budget.time_budget_s,
        reuse_actors=True,
        metric=objectives[0].metric if single else None,
        mode=objectives[0].mode if single else None,
    )
    trainable = tune.with_resources(tune.with_parameters(tune_trial, spec=spec), TrialResources(spec))
    return trainable, tune_config


def failure_config(cfg: TrainConfig) -> tune.FailureConfig:
    """Tune restarts a trial whose process was lost (``runtime.max_failures`` times) from its last
    checkpoint; a multi-worker trial's ``TorchTrainer`` also retries its own workers, and its
    restarted trial process re-attaches to the Ray Train run of the same name. An error in the
    input (``UserError``) or one that would recur from the checkpoint (a non-finite loss, out of
    memory) is not retried (``trainables.launch.trial.tune_trial``); other errors are, up to
    ``runtime.max_failures`` times."""
    return tune.FailureConfig(max_failures=cfg.runtime.max_failures)


def check_launchable(study: Study, address: str | None = None) -> None:
    """What the launch builds from the study, built before any directory or run exists: Tune's
    scheduler, and the configs of the first trials the study's sampler proposes (each also
    checked for resources the Ray it will run on cannot have)."""
    from sweep.study.space import sampled_params

    require_cluster(address)
    try:
        make_scheduler(study)
    except AssertionError as err:  # Ray checks its arguments with asserts
        raise UserError(f"study {study.name!r}: Tune refuses its scheduler {study.config.scheduler.model_dump()}: {err}") from None
    for params in sampled_params(study.config, min(study.num_trials, 8)):
        check_local_resources(study.recipe.config(params), address)
