"""What a training writes to its MLflow run while it trains: each epoch's metrics once (a resumed run
skips epochs already logged), the in-epoch progress tag, and MLflow's system metrics."""

from __future__ import annotations

from typing import Any

from mjp import keys
from trainables.tracking import schema
from trainables.tracking.progress import Progress
from trainables.tracking.runs import RunTracker


class EpochLogger:
    """Rank 0's per-epoch, running and final metrics, skipping steps a previous attempt logged;
    the running reports' in-epoch progress as the run's ``mjp.progress`` tag (what the console
    shows); MLflow's system metrics every ``tracking.system_metrics_s`` seconds while it trains."""

    def __init__(self, tracker: RunTracker):
        self.tracker = tracker
        self.last_epoch = tracker.last_step(keys.VAL_TOP1)
        self.last_running = tracker.last_step(keys.TRAIN_LOSS + keys.RUNNING_SUFFIX)
        self.system_metrics = start_system_metrics(tracker)

    def running(self, metrics: dict[str, float], step: int) -> None:
        progress = Progress.from_report(metrics)
        if progress is not None:
            self.tracker.set_tags({schema.TAG_PROGRESS: progress.to_tag()})
        losses = {f"{k}{keys.RUNNING_SUFFIX}": v for k, v in metrics.items() if k.startswith("train/loss")}
        if losses and step > self.last_running:  # a short epoch's in-between reports carry the progress alone
            self.tracker.log_metrics(losses, step)

    def epoch(self, metrics: dict[str, float], epoch: int) -> None:
        if epoch > self.last_epoch:
            self.tracker.log_metrics(metrics, step=epoch)

    def final(self, metrics: dict[str, float]) -> None:
        """End-of-training evaluation: one value per key (no epoch axis); system metrics stop."""
        self.tracker.log_new_metrics(metrics)
        if self.system_metrics is not None:
            stop_system_metrics(self.system_metrics)
            self.system_metrics = None


def start_system_metrics(tracker: RunTracker) -> Any:
    """MLflow's system-metrics monitor on ``tracker``'s run, sampling every
    ``tracking.system_metrics_s`` seconds as the run's params say (None when off). It stops at
    ``finish()`` or by itself once the run is no longer RUNNING. psutil comes with Ray (its
    vendored copy, importable once Ray is); GPU metrics need pynvml (``nvidia-ml-py``)."""
    interval = tracker.run().data.params.get("tracking.system_metrics_s")
    if interval in (None, "", "None"):
        return None
    try:
        import psutil  # noqa: F401
    except ImportError:
        tracker.set_tags({schema.TAG_SYSTEM_METRICS: "off: psutil is not importable in the training process"})
        return None
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    monitor = SystemMetricsMonitor(tracker.run_id, sampling_interval=float(interval), resume_logging=True, tracking_uri=tracker.uri)
    monitor.start()
    return monitor


def stop_system_metrics(monitor: Any) -> None:
    """Stop the monitor and log one last sample: MLflow's own ``finish()`` drops the interval in
    progress, so a training shorter than one interval would have none."""
    monitor.finish()
    monitor.collect_metrics()
    monitor.publish_metrics(monitor.aggregate_metrics())
    monitor.mlflow_logger.flush()
