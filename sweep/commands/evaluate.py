"""``mjp evaluate``: the paper's evaluations on a model that already exists.

Sources: a logged MLflow run (its config and ``checkpoint/model.pt``; results are logged into
that run), a checkpoint file with its config, or a timm model with local weights (a new
evaluation run). The evaluations: those of ``trainables/evaluation/registry.py``, which also
writes ``--what``'s help (``WhatOption``); a section the config does not set runs with its
defaults (``--set eval.robustness.images=5000`` changes one).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from trainables.errors import UserError
from trainables.tracking import schema

if TYPE_CHECKING:
    from trainables.evaluation.result import EvaluationResult

#: the config a timm model is evaluated with when no --config is given (its data section matters)
TIMM_DEFAULT_CONFIG = "trainables/configs/imagenet_deit_small.yaml"


def what_help(default: str | None = None) -> str:
    """``--what``'s help: every registered evaluation with its one line, in the registry's order."""
    from trainables.evaluation.registry import EVALUATIONS

    listed = "; ".join(f"{name} - {evaluation.description}" for name, evaluation in EVALUATIONS.items())
    return "comma-separated names" + (f" (default: {default})" if default else "") + f" of: {listed}"


class WhatOption(argparse.Action):
    """``--what``, stored as given (``parse_what`` reads it when the command runs). Its help is
    ``what_help()``, written when a help is drawn: building the parser imports no registry (nor the
    config schema it holds), so ``mjp --help`` stays as cheap as argparse."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        setattr(namespace, self.dest, values)

    @property
    def help(self) -> str:
        return what_help(self.default).replace("%", "%%")  # argparse expands %(...)s in a help

    @help.setter
    def help(self, value: str | None) -> None:
        """The ``help=`` argparse passes on is not used: the registry writes it."""


def parse_what(text: str) -> tuple[str, ...]:
    from trainables.evaluation.registry import EVALUATIONS

    chosen = tuple(w.strip() for w in text.split(",") if w.strip())
    unknown = [w for w in chosen if w not in EVALUATIONS]
    if unknown or not chosen:
        raise UserError(
            f"--what {text!r}: unknown {', '.join(map(repr, unknown)) or 'nothing given'}; allowed: a comma-separated subset of "
            f"{', '.join(EVALUATIONS)}"
        )
    return chosen


def _timm_config(args: argparse.Namespace):
    """The config of ``--timm NAME``: its data from --config, the model as timm builds it (row A)."""
    from mjp.models.factory import timm_class
    from trainables.config.build import load_config

    try:
        timm_class(args.timm)
    except ValueError as err:
        raise UserError(f"--timm: {err}") from None
    if args.pretrained_file is None:
        print(f"note: no --pretrained-file: {args.timm} is evaluated with random weights (nothing is downloaded)")
    own_kwargs = any(item.split("=", 1)[0].strip().startswith("model.kwargs") for item in args.set)
    overrides = [f"model.name={args.timm}", *([] if own_kwargs else ["model.kwargs={}"]), "mjp.variant=A", *args.set]
    if args.pretrained_file:
        overrides.append(f"model.pretrained_file={args.pretrained_file}")
    return load_config(args.config or TIMM_DEFAULT_CONFIG, overrides)


def _model(args: argparse.Namespace, what: tuple[str, ...]):
    """(config, model in eval mode, the MLflow run to log into or None, tracking URI)."""
    from trainables.evaluation.suite import with_sections
    from trainables.launch.preflight import preflight
    from trainables.train.trained import load_trained

    if args.timm:
        cfg = with_sections(_timm_config(args), what)
        preflight(cfg)
        from trainables.data.info import data_info
        from trainables.train.engine import build_model

        return cfg, build_model(cfg, data_info(cfg).shape).eval(), None, None
    trained = load_trained(run=args.run, checkpoint=args.checkpoint, config=args.config, uri=args.uri, overrides=args.set)
    cfg = with_sections(trained.cfg, what)
    preflight(cfg)
    return cfg, trained.model, trained.run_id, trained.uri


def _tracker(cfg, args: argparse.Namespace, run_id: str | None, uri: str | None):
    from trainables.config.build import flat_params
    from trainables.tracking.runs import RunTracker
    from trainables.tracking.store import check_store_writable, tracking_uri

    uri = uri or tracking_uri(args.uri or cfg.tracking.uri)
    check_store_writable(uri)
    if run_id is not None:
        return RunTracker(uri, run_id)
    source = args.timm or args.checkpoint
    tracker = RunTracker.create(
        uri,
        cfg.tracking.experiment,
        run_name=f"evaluate {source}",
        tags={
            schema.TAG_KIND: schema.KIND_EVALUATION,
            schema.TAG_VARIANT: cfg.variant,
            schema.TAG_MODEL: cfg.model.name,
            schema.TAG_DATASET: cfg.data.name,
            schema.TAG_SOURCE: f"timm:{args.timm}" + (f" weights {args.pretrained_file}" if args.pretrained_file else " (random weights)")
            if args.timm
            else f"checkpoint {args.checkpoint}",
        },
    )
    tracker.log_params(flat_params(cfg))
    return tracker


def evaluate_model(cfg, model, what: tuple[str, ...]) -> dict[str, EvaluationResult]:
    """Run the chosen evaluations on one process, one line each on the console with its time."""
    import time

    import torch

    from trainables.data.datasets import load_datasets
    from trainables.evaluation.suite import run_evaluations

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    bundle = load_datasets(cfg)
    results = {}
    for name in what:
        start = time.perf_counter()
        print(f"  {name} ...", end="", flush=True)
        results.update(run_evaluations(cfg, model, bundle, device, (name,)))
        print(f" {time.perf_counter() - start:.1f} s")
    return results


def cmd_evaluate(args: argparse.Namespace) -> int:
    what = parse_what(args.what)
    if args.pretrained_file and not args.timm:
        raise UserError("--pretrained-file goes with --timm; a run or checkpoint brings its own weights")
    if args.pretrained_file:
        from trainables.launch.weights_file import check_weights_file

        check_weights_file("--pretrained-file", args.pretrained_file)
    import trainables.tracking.runs  # noqa: F401 - imports mlflow, which installs a console handler, replaced next
    from trainables.launch.ray_runtime import library_logs_to

    library_logs_to(None)
    cfg, model, run_id, uri = _model(args, what)
    tracker = _tracker(cfg, args, run_id, uri)
    print(f"evaluating {cfg.model.name} / {cfg.variant} on {cfg.data.name}: {', '.join(what)}")
    results = evaluate_model(cfg, model, what)

    from analysis.markdown import format_value, markdown_table
    from trainables.evaluation.result import log_evaluation

    metrics = {k: v for result in results.values() for k, v in result.metrics.items()}
    tracker.log_new_metrics(metrics)
    for name, result in results.items():
        log_evaluation(tracker, name, result)
    print(markdown_table(["metric", "value"], [[k, format_value(k, v)] for k, v in sorted(metrics.items())]))
    for name, result in results.items():
        for line in result.notes:
            print(f"note ({name}): {line}")
    from sweep.console.commands_shown import mlflow_ui_command

    print(
        f"logged into MLflow run {tracker.run_id} of\n  {tracker.uri}\nMLflow UI:\n  "
        f"{mlflow_ui_command(tracker.uri, cfg.tracking.experiment)}"
    )
    return 0
