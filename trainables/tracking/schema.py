"""Every name a run in MLflow is written and read by: tags, the sweep's parent-run params, artifact
paths, and how analysis names the columns it reads. Pure Python (no mlflow import), so writers
(trainables, sweep) and readers (sweep's status, analysis) share one spelling. The metric keys
belong to the method and stay in ``mjp/keys.py``, which computes them."""

from __future__ import annotations

from dataclasses import dataclass

# --- MLflow's own tags --------------------------------------------------------------------------
TAG_PARENT = "mlflow.parentRunId"
TAG_RUN_NAME = "mlflow.runName"
TAG_NOTE = "mlflow.note.content"
TAG_GIT_COMMIT = "mlflow.source.git.commit"
TAG_DATA_CONTEXT = "mlflow.data.context"  # on a run's dataset input: train | val
TAG_EXPERIMENT_KIND = "mlflow.experimentKind"

# --- this project's run tags -------------------------------------------------------------------
TAG_KIND = "mjp.kind"  # KIND_TRAIN | KIND_SWEEP | KIND_EVALUATION
KIND_TRAIN, KIND_SWEEP, KIND_EVALUATION = "train", "sweep", "evaluation"
TAG_TRIAL_ID = "mjp.trial_id"
TAG_STUDY = "mjp.study"
TAG_VARIANT = "mjp.variant"
TAG_LABEL = "mjp.label"
TAG_MODEL = "mjp.model"
TAG_DATASET = "mjp.dataset"
TAG_SOURCE = "mjp.source"  # mjp evaluate: the checkpoint or timm model evaluated
TAG_SMOKE = "mjp.smoke"
TAG_COMMAND = "mjp.command"  # a sweep's parent: the command that started it (`mjp demo`), as results captions say
TAG_ERROR = "mjp.error"
TAG_STOPPED = "mjp.stopped"
TAG_ERROR_FINAL = "mjp.error_final"  # the trial failed in a way a retry repeats: Tune's retries end at once
TAG_INTERRUPTED = "mjp.interrupted"
TAG_PROCESS = "mjp.process"  # host:pid of the trial process (its latest attempt)
TAG_DRIVER = "mjp.driver"  # host:IDENTITY of a sweep's driver, its latest run or resume (sweep/tuner/owner.py)
TAG_EXPERIMENT_DIR = "mjp.experiment_dir"  # a sweep's directory: what `mjp sweep resume` takes
TAG_NODE_PREFIX = "mjp.node.rank"  # + rank: the Ray node id that training worker ran on (its latest attempt)
TAG_NODES_SEEN = "mjp.nodes"  # every Ray node id rank 0 trained on, in order, across restarts (comma-separated)
TAG_BEST_TRIAL = "mjp.best_trial"
TAG_BEST_PARAMS = "mjp.best_params"
TAG_TRIAL_KEY = "mjp.trial_key"  # digest of a trial's sampled params: the same trial proposed again after a resume
TAG_ORPHAN = "mjp.orphan"  # a child run whose Tune trial a resume did not restore: the re-proposed trial adopts it
TAG_SAMPLE_PREFIX = "mjp.sample."  # + sampled key: the value a sweep chose for this trial
TAG_PROGRESS = "mjp.progress"  # where a trial is within its epoch (trainables.tracking.progress)
TAG_SYSTEM_METRICS = "mjp.system_metrics"  # why MLflow's system metrics are off, when they are


def notes_tag(evaluation: str) -> str:
    """``mjp.<evaluation>.notes``: why an evaluation's metrics are absent (``privacy``, ``robustness``, ``pe``)."""
    return f"mjp.{evaluation}.notes"


# --- artifacts ----------------------------------------------------------------------------------
ARTIFACT_CHECKPOINT_DIR, ARTIFACT_CHECKPOINT_FILE = "checkpoint", "model.pt"  # a trained run's weights
ARTIFACT_CHECKPOINT = f"{ARTIFACT_CHECKPOINT_DIR}/{ARTIFACT_CHECKPOINT_FILE}"
ARTIFACT_STUDY_DIR = "study"  # a sweep's study file, on its parent run
ARTIFACT_PARETO = "pareto/pareto_front.json"  # a multi-objective sweep's front, on its parent run
ARTIFACT_REPORT_DIR = "report"  # a sweep's report; its figures in report/figures
ARTIFACT_REPORT_FIGURES_DIR = f"{ARTIFACT_REPORT_DIR}/figures"

#: tag -> the column of analysis's tidy frame that holds it
RUN_COLUMNS = {
    TAG_STUDY: "study",
    TAG_TRIAL_ID: "trial_id",
    TAG_VARIANT: "variant",
    TAG_PARENT: "parent_run_id",
    TAG_RUN_NAME: "run_name",
    TAG_KIND: "kind",
    TAG_ERROR: "error",
    TAG_LABEL: "label",
}


def tag_filter(tag: str, value: str) -> str:
    """An MLflow search filter on one tag (names with dots quoted as MLflow requires)."""
    return f"tags.`{tag}` = '{value}'"


@dataclass(frozen=True)
class SweepParams:
    """A sweep's parent-run params: written once when it starts, read by ``sweep status`` and the
    analysis. MLflow keeps params as strings; ``to_params``/``from_params`` are the one encoding."""

    study: str
    search_algorithm: str
    search_seed: int
    objectives: tuple[tuple[str, str], ...]  # (metric, mode)
    trials: int
    max_concurrent: int
    scheduler: str
    smoke: bool
    space: tuple[str, ...]
    experiment_dir: str
    paper_tables: tuple[str, ...]

    def to_params(self) -> dict[str, str]:
        return {
            "study": self.study,
            "search.algorithm": self.search_algorithm,
            "search.seed": str(self.search_seed),
            "objectives": ",".join(f"{metric}:{mode}" for metric, mode in self.objectives),
            "trials": str(self.trials),
            "max_concurrent": str(self.max_concurrent),
            "scheduler": self.scheduler,
            "smoke": str(self.smoke),
            "space": ",".join(self.space),
            "experiment_dir": self.experiment_dir,
            "paper_tables": ",".join(self.paper_tables),
        }

    @classmethod
    def from_params(cls, params: dict[str, str]) -> SweepParams:
        """The params of a parent run (a field absent from an older sweep reads as empty)."""
        get = params.get

        def items(key: str) -> tuple[str, ...]:
            return tuple(p for p in (get(key) or "").split(",") if p)

        def number(key: str) -> int:
            text = get(key) or ""
            return int(text) if text.lstrip("-").isdigit() else 0

        return cls(
            study=get("study", ""),
            search_algorithm=get("search.algorithm", ""),
            search_seed=number("search.seed"),
            objectives=tuple(tuple(o.rsplit(":", 1)) for o in items("objectives") if ":" in o),  # type: ignore[misc]
            trials=number("trials"),
            max_concurrent=number("max_concurrent"),
            scheduler=get("scheduler", ""),
            smoke=get("smoke") == "True",
            space=items("space"),
            experiment_dir=get("experiment_dir", ""),
            paper_tables=items("paper_tables"),
        )
