"""A trained model to evaluate or attack: from an MLflow run (its params and ``checkpoint/model.pt``)
or from a checkpoint file and its config. Weights load with ``weights_only=True`` only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainables.config.schema import TrainConfig
from trainables.errors import UserError
from trainables.scratch import scratch_folder


@dataclass
class Trained:
    cfg: TrainConfig
    model: Any  # torch.nn.Module, in eval mode
    run_id: str | None
    uri: str | None


def load_trained(
    *,
    run: str | None = None,
    checkpoint: str | None = None,
    config: str | None = None,
    uri: str | None = None,
    overrides: list[str] | None = None,
) -> Trained:
    """Exactly one of ``run`` and ``checkpoint`` (which needs ``config``)."""
    from trainables.config.build import build_config, load_config
    from trainables.tracking import schema
    from trainables.tracking.runs import download_run_checkpoint, get_run_or_fail, run_config_tree
    from trainables.tracking.store import tracking_uri

    if checkpoint is not None:
        if not config:
            raise UserError(f"--checkpoint {checkpoint}: give the TrainConfig it was trained with as --config")
        cfg, resolved_uri = load_config(config, overrides), None
        weights_file = checkpoint
        weights = _weights(weights_file, weights_file)
    elif run is None:
        raise UserError("give the MLflow run to load (--run), or a checkpoint file (--checkpoint) with its --config")
    else:
        resolved_uri = tracking_uri(uri)
        get_run_or_fail(resolved_uri, run)
        from trainables.config.overrides import parse_overrides

        cfg = build_config(
            run_config_tree(resolved_uri, run),
            parse_overrides(overrides or []),
            source=f"MLflow run {run}" + (" with --set " + " ".join(overrides) if overrides else ""),
        )
        # read from a folder gone once read, also when this process is killed (a model's weights each time)
        weights_file = f"MLflow run {run}'s {schema.ARTIFACT_CHECKPOINT}"
        with scratch_folder() as folder:
            weights = _weights(str(download_run_checkpoint(resolved_uri, run, str(folder))), weights_file)
    from trainables.data.info import data_info
    from trainables.train.engine import build_model
    from trainables.train.state import CheckpointError

    model = build_model(cfg, data_info(cfg).shape)
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    shapes = [
        f"{k} {tuple(weights[k].shape)} vs {tuple(v.shape)}" for k, v in expected.items() if k in weights and weights[k].shape != v.shape
    ]
    if missing or unexpected or shapes:
        found = "; ".join(
            x
            for x in (
                f"missing {missing[:3]}" if missing else "",
                f"unexpected {unexpected[:3]}" if unexpected else "",
                f"shapes {shapes[:3]}" if shapes else "",
            )
            if x
        )
        raise CheckpointError(f"{weights_file} does not fit {cfg.model.name} as configured ({found}); give the config it was trained with")
    model.load_state_dict(weights)
    return Trained(cfg, model.eval(), run, resolved_uri)


def _weights(path: str, name: str) -> dict[str, Any]:
    """The model weights in the checkpoint file ``path`` (torch loads here, after the config was
    checked), a ``CheckpointError`` naming it ``name`` (a run's, where ``path`` is a folder that is
    gone once read)."""
    from trainables.train.state import CheckpointError, load_safely, model_weights

    try:
        return model_weights(load_safely(path), path)
    except CheckpointError as err:
        if name == path:
            raise
        raise CheckpointError(str(err).replace(path, name)) from None
