"""Figures from synthetic runs: each draws what it should, and nothing when the runs lack it."""

import pandas as pd

from analysis.figures import mask_ratio_curves, metric_bars, pareto_plot, shuffle_curves, training_curves


def trials(n=6):
    return pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(n)],
            "status": "FINISHED",
            "sample.mjp.mask_ratio": [0.03 * i for i in range(n)],
            "mjp.mask_ratio": [0.03 * i for i in range(n)],
            "val/top1": [0.8 - 0.01 * i for i in range(n)],
            "val/consistency": [0.6 + 0.05 * i for i in range(n)],
            "val/diff_norm": [10 - i for i in range(n)],
            "privacy/c_psnr": [20 - i for i in range(n)],
        }
    )


def test_pareto_front_is_highlighted_among_all_trials_with_psnr_when_logged():
    fig = pareto_plot(trials(), front={"r0", "r5"})
    assert len(fig.axes) == 2 and "2 on the front" in fig._suptitle.get_text()
    assert pareto_plot(trials(), front=set()) is None


def test_mask_ratio_curves_only_when_the_ratio_varies():
    assert len(mask_ratio_curves(trials()).axes) == 3
    assert mask_ratio_curves(trials().assign(**{"mjp.mask_ratio": 0.27})) is None


def test_bars_say_when_there_are_no_error_bars_and_curves_need_two_ratios():
    fig = metric_bars(trials())
    assert "one run per configuration: no error bars; differences between configurations may be seed noise" in fig._suptitle.get_text()
    assert shuffle_curves(trials()) is None  # no val/top1_shuffled_* columns


def test_training_curves_from_histories():
    history = pd.DataFrame(
        {
            "run_id": ["r0"] * 4,
            "key": ["val/top1", "val/top1", "train/loss", "train/loss"],
            "step": [1, 2, 1, 2],
            "value": [0.5, 0.6, 2.0, 1.5],
        }
    )
    fig = training_curves(trials(1), history)
    assert [len(ax.lines) for ax in fig.axes] == [1, 1]
    assert "one run per configuration" in fig._suptitle.get_text() and "mean" not in fig._suptitle.get_text()
    assert training_curves(trials(1), history.iloc[0:0]) is None
    seeds = pd.concat([trials(1), trials(1).assign(run_id="r1")], ignore_index=True)
    assert "mean over 2 seeds" in training_curves(seeds, pd.concat([history, history.assign(run_id="r1")]))._suptitle.get_text()


def test_bars_start_at_zero_so_their_heights_are_their_values():
    close = trials().assign(**{"val/top1": [0.91, 0.92, 0.93, 0.91, 0.92, 0.93]})  # a 2-point spread near the top
    fig = metric_bars(close)
    for ax in fig.axes:
        low, high = ax.get_ylim()
        tallest = max(p.get_height() for p in ax.patches)
        assert low == 0 and tallest <= high
    top1 = fig.axes[0]
    assert top1.get_ylim()[1] <= 100 and [round(p.get_height(), 1) for p in top1.patches][:3] == [91.0, 92.0, 93.0]
    assert "bars start at 0" in fig._suptitle.get_text()
