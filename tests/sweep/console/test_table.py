"""The live view's table as pure layout, without Tune: rows, the summary and its ETA, the columns
kept at a width, and the plain text."""

import time

import pytest

from sweep.console.table import ConsoleTable, Row, clock
from trainables.tracking.progress import Progress


def table(with_progress: bool = False) -> ConsoleTable:
    t = ConsoleTable("sweep quickstart-1", [("val/top1", "max"), ("val/consistency", "max")], total_trials=4, with_progress=with_progress)
    now = time.monotonic()
    t.rows["a"] = Row(
        "A baseline seed 0",
        epochs=10,
        state="done",
        epoch=10,
        started=now - 100,
        ended=now - 10,
        latest={"val/top1": 0.91},
        best={"val/top1": 0.93},
    )
    t.rows["b"] = Row(
        "J jp_unk_dal_mlp seed 0",
        epochs=10,
        state="running",
        epoch=5,
        started=now - 50,
        latest={"val/top1": 0.8, "val/consistency": 0.7},
        best={"val/top1": 0.82, "val/consistency": 0.7},
    )
    return t


def test_the_clock_reads_minutes_then_hours():
    assert (clock(0), clock(75), clock(3600 + 61), clock(-5)) == ("0:00", "1:15", "1:01:01", "0:00")


def test_the_eta_is_the_epochs_left_at_the_running_trials_pace():
    t = table()
    # running: 5 epochs in ~50 s -> 0.1 epoch/s; left: its 5 + two trials not started x 10 epochs
    assert t.eta() == pytest.approx(25 / 0.1, rel=0.02)
    assert "2/4 trials started (1 running, 1 done)" in t.summary() and "ETA" in t.summary()


def test_the_plain_table_has_a_row_per_trial_with_rounded_values():
    lines = table().plain().splitlines()
    assert lines[0].startswith("sweep quickstart-1")
    assert lines[1].split()[:3] == ["trial", "state", "epoch"]
    row = next(line for line in lines if line.startswith("J jp_unk_dal_mlp"))
    assert "running" in row and "5/10" in row and "80.0%" in row and "82.0%" in row and "nan" not in row


def test_a_narrow_terminal_drops_columns_in_order_and_keeps_the_first_objective():
    t = table(with_progress=True)
    t.rows["b"].progress = Progress(6, 11, 22, 800.0, 0.1, 3.0, 0.0)
    wide = [h for h, _ in t.fitted_widths(10**6)]
    assert wide[:4] == ["trial", "state", "progress", "epoch"] and "this epoch" in wide
    narrow = [h for h, _ in t.fitted_widths(60)]
    assert "this epoch" not in narrow and "val/top1" in narrow and {"trial", "state", "epoch"} <= set(narrow)
    assert sum(w + 3 for w in t.fitted_widths(60).values()) <= 60 + 3
