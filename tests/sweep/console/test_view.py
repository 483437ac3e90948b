"""The live view of a sweep: it reads at 80 columns (columns dropped by priority, none cut to
an ellipsis) and its ETA follows the trials' own pace, not the sweep's start-up."""

import io

import pytest
from ray.tune.experiment import Trial
from rich.console import Console

from mjp import keys
from sweep.console.view import ConsoleView
from trainables.tracking.progress import Progress

LABELS = ["A baseline seed 0", "E jp seed 0", "G jp_unk seed 0", "J jp_unk_dal_mlp seed 0"]


def view_with_trials(progress: bool = True) -> ConsoleView:
    view = ConsoleView(
        "sweep quickstart-20260101-000000",
        lambda p: p["label"],
        lambda p: 30,
        [(keys.VAL_TOP1, "max")],
        4,
        stream=io.StringIO(),
        progress_of=(lambda trial_id: None) if progress else None,
    )
    for i, label in enumerate(LABELS):
        trial = Trial("fake", config={"label": label}, trial_id=f"t{i}", stub=True)
        view.on_trial_start(0, [trial], trial)
        view.on_trial_result(0, [trial], trial, {"epoch": 12, keys.VAL_TOP1: 0.9123})
        view.rows[f"t{i}"].progress = Progress(13, 120, 240, 1530.0, 0.12, 40.0, 0.0)
    return view


def rendered(view: ConsoleView, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(view.table.rich(width))
    return console.file.getvalue()


def test_at_80_columns_every_kept_cell_is_whole_and_the_objective_stays():
    text = rendered(view_with_trials(), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for label in LABELS:
        assert label in text
    assert "val/top1" in text and "91.2%" in text and "best" in text and "12/30" in text
    assert "this epoch" not in text and "progress" not in text  # the in-epoch detail, then the bar, go first


def test_a_wide_terminal_shows_every_column():
    text = rendered(view_with_trials(), 200)
    assert "this epoch" in text and "best" in text and "time" in text and "step 120/240" in text
    assert "…" not in text


def test_the_eta_is_the_trials_pace_not_the_sweeps_start_up():
    view = view_with_trials(progress=False)
    view.started -= 60  # a minute of Ray start-up before the trials
    for row in view.rows.values():
        row.progress, row.epoch, row.started = None, 10, row.started - 10  # 10 of 30 epochs in 10 s: 1 epoch/s each
    assert view.table.eta() == pytest.approx(4 * 20 / 4, rel=0.05)  # 80 epochs left at 4 epochs/s


def test_at_80_columns_long_labels_wrap_and_two_objectives_stay_whole():
    """tune's and pareto's labels run past 50 characters, pareto has two objectives: the label
    wraps at its spaces, no other cell is cut."""
    labels = ["mask_ratio=0.421 dal=linear dal_weight=0.00837 seed 0", "mask_ratio=0.137 dal=mlp dal_weight=0.0500 seed 1"]
    view = ConsoleView(
        "sweep pareto-20260101-000000",
        lambda p: p["label"],
        lambda p: 100,
        [(keys.VAL_TOP1, "max"), (keys.VAL_CONSISTENCY, "max")],
        2,
        stream=io.StringIO(),
        progress_of=lambda trial_id: None,
    )
    for i, label in enumerate(labels):
        trial = Trial("fake", config={"label": label}, trial_id=f"t{i}", stub=True)
        view.on_trial_start(0, [trial], trial)
        view.on_trial_result(0, [trial], trial, {"epoch": 12, keys.VAL_TOP1: 0.9123, keys.VAL_CONSISTENCY: 0.8765})
    text = rendered(view, 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
    for header in ("trial", "state", "epoch", keys.VAL_TOP1, keys.VAL_CONSISTENCY):
        assert header in text, text
    assert "12/100" in text and "91.2%" in text and "87.6%" in text
    words = " ".join(text.split())
    for label in labels:
        assert all(word in words for word in label.split()), text
    assert rendered(view, 200).count("dal_weight=0.00837 seed 0") == 1  # a wide terminal: one line per label
