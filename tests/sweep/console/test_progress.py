"""The progress line of a long command: silent for short work, then done/total and an ETA."""

import io

from sweep.console.progress import ProgressLine


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_short_work_prints_nothing_and_long_work_shows_an_eta_at_most_every_plain_s():
    clock, out = Clock(), io.StringIO()
    line = ProgressLine("inversion attack", stream=out, clock=clock, quiet_s=2, plain_s=10)
    clock.now += 1
    line(10, 100)
    assert out.getvalue() == ""  # within the first seconds: nothing
    clock.now += 3  # 4 s in, 40 done: 6 s left
    line(40, 100)
    assert out.getvalue() == "inversion attack: 40/100 (40%) · 0:04 elapsed · ETA 0:06\n"
    clock.now += 1
    line(50, 100)
    assert out.getvalue().count("\n") == 1  # a pipe gets a line at most every plain_s
    clock.now += 1
    line(100, 100)  # the end is always shown
    assert out.getvalue().splitlines()[-1] == "inversion attack: 100/100 (100%) · 0:06 elapsed · ETA 0:00"
