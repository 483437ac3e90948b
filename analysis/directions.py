"""The paper's directions on our runs, each tested against seed noise with a paired test over seeds.

The paper claims that MJP (Table 4 row J: JP + UNK + DAL) against the baseline (row A) keeps or
improves top-1 accuracy, raises consistency under a test-time shuffle and lowers the Diff. Norm
(Table 1). On a study that trains both rows with the same seeds, run ``s`` of A and run ``s`` of J
share the seed of everything but the method (data order, initialisation, evaluation draws), so the
comparison is paired: the differences ``d_s = J_s - A_s`` and Student's paired t-test on them
(``scipy.stats.ttest_rel``, two-sided). A difference "exceeds the seed-to-seed spread" when its
mean is larger in size than the larger of the two rows' standard deviations over seeds.

Three claims are tested on the same runs, so the p-values are corrected for the three (Holm's
step-down method: the smallest p times 3, the next times 2, the largest times 1, each at least
the one before): a direction is "significant" when its corrected p is below ``ALPHA``, and the
family of three then errs with probability at most ``ALPHA``. Each mean difference also gets its
95% confidence interval from the t distribution with ``n - 1`` degrees of freedom
(``mean +- t * sd / sqrt(n)``): with five seeds, four degrees of freedom, ``t = 2.78``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.markdown import is_fraction
from mjp import keys

#: significance level of the paired test
ALPHA = 0.05
BASELINE, METHOD = "A", "J"
VARIANT_COLUMN, SEED_COLUMN = "sample.mjp.variant", "runtime.seed"


@dataclass(frozen=True)
class Direction:
    """One claim of the paper: ``metric`` moves by ``sign`` (+1 up, -1 down) from A to J; with
    ``sign`` 0 the claim is "not worse" (within noise or better)."""

    metric: str
    title: str
    sign: int
    claim: str


DIRECTIONS: tuple[Direction, ...] = (
    Direction(keys.VAL_TOP1, "top-1", 0, "top-1 within noise or better"),
    Direction(keys.VAL_CONSISTENCY, "consistency", +1, "consistency up"),
    Direction(keys.VAL_DIFF_NORM, "Diff. Norm", -1, "Diff. Norm down"),
)


@dataclass(frozen=True)
class PairedDifference:
    """J - A over the seeds both rows finished: per-seed differences and their test."""

    direction: Direction
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    spread: float  # the larger of A's and J's standard deviation over seeds
    p_value: float  # paired t-test, two-sided; 0 when every seed moved by the same non-zero amount, 1 when none moved
    p_corrected: float  # ``p_value`` corrected by Holm's method for the directions tested together
    interval: tuple[float, float]  # 95% confidence interval of the mean difference

    @property
    def mean(self) -> float:
        return sum(self.differences) / len(self.differences)

    @property
    def significant(self) -> bool:
        return self.p_corrected < ALPHA

    @property
    def exceeds_spread(self) -> bool:
        return abs(self.mean) > self.spread

    @property
    def holds(self) -> bool:
        """The paper's direction holds: a significant move its way, or for top-1 no significant loss."""
        if self.direction.sign == 0:
            return not (self.significant and self.mean < 0)
        return self.significant and self.mean * self.direction.sign > 0


def paired_differences(runs: pd.DataFrame) -> list[PairedDifference]:
    """Every direction whose metric both rows logged, paired by seed over finished runs of A and J."""
    done = runs[runs["status"] == "FINISHED"] if "status" in runs else runs
    if not {VARIANT_COLUMN, SEED_COLUMN} <= set(done.columns):
        return []
    found = []
    for direction in DIRECTIONS:
        if direction.metric not in done:
            continue
        table = done.pivot_table(index=SEED_COLUMN, columns=VARIANT_COLUMN, values=direction.metric, aggfunc="mean")
        if not {BASELINE, METHOD} <= set(table.columns):
            continue
        pairs = table[[BASELINE, METHOD]].dropna()
        if len(pairs) < 2:
            continue
        diffs = pairs[METHOD] - pairs[BASELINE]
        spread = float(max(pairs[BASELINE].std(ddof=1), pairs[METHOD].std(ddof=1)))
        found.append((direction, pairs, diffs, spread, _paired_p(pairs[METHOD], pairs[BASELINE])))
    corrected = holm([p for *_, p in found])
    return [
        PairedDifference(
            direction,
            tuple(int(s) for s in pairs.index),
            tuple(float(d) for d in diffs),
            spread,
            p,
            p_holm,
            confidence_interval(list(diffs)),
        )
        for (direction, pairs, diffs, spread, p), p_holm in zip(found, corrected)
    ]


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down correction of ``m`` p-values, in their order: the ``i``-th smallest times
    ``m - i`` (``i`` from 0), made non-decreasing in that order, at most 1."""
    m, out, running = len(p_values), [0.0] * len(p_values), 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        out[index] = running
    return out


def confidence_interval(differences: list[float], level: float = 0.95) -> tuple[float, float]:
    """The ``level`` confidence interval of the mean of ``differences`` (Student's t, n - 1 degrees of freedom)."""
    from scipy.stats import t

    n = len(differences)
    mean = sum(differences) / n
    sd = (sum((d - mean) ** 2 for d in differences) / (n - 1)) ** 0.5
    half = float(t.ppf(0.5 + level / 2, n - 1)) * sd / n**0.5
    return (mean - half, mean + half)


def _paired_p(after: pd.Series, before: pd.Series) -> float:
    from scipy.stats import ttest_rel

    diffs = after - before
    if diffs.std(ddof=1) <= 1e-12 * max(1.0, float(diffs.abs().max())):
        # every seed moved by the same amount (exact fractions of a small validation set do that):
        # no move at all, or the steadiest move there is; the t statistic is undefined either way
        return 1.0 if float(diffs.abs().max()) == 0 else 0.0
    return float(ttest_rel(after, before).pvalue)


def _amount(metric: str, value: float) -> str:
    return f"{100 * value:+.1f} points" if is_fraction(metric) else f"{value:+.2f}"


def _size(metric: str, value: float) -> str:
    return f"{100 * value:.1f} points" if is_fraction(metric) else f"{value:.2f}"


def sentence(d: PairedDifference, tested: int = len(DIRECTIONS)) -> str:
    """One Markdown bullet: the claim, whether it holds here, and the numbers behind the verdict."""
    metric = d.direction.metric
    if d.direction.sign == 0:
        verdict = "better" if d.significant and d.mean > 0 else "a significant loss" if d.significant else "within seed noise"
        holds = f"**holds** ({verdict})" if d.holds else f"**does not hold** ({verdict})"
    else:
        holds = (
            "**holds**"
            if d.holds
            else "**does not hold**"
            if d.significant or d.mean * d.direction.sign <= 0
            else "**not shown** (the right way, not significant)"
        )
    spread = "exceeds" if d.exceeds_spread else "does not exceed"
    together = {2: "two", 3: "three"}.get(tested, str(tested))
    p = f"p = {d.p_value:.3g}, corrected for the {together} directions p = {d.p_corrected:.3g}"
    per_seed = ", ".join(_amount(metric, x) for x in d.differences)
    low, high = (_amount(metric, x) for x in d.interval)
    return (
        f"- {d.direction.claim}: {holds}. J - A = {_amount(metric, d.mean)} on average over seeds "
        f"{', '.join(map(str, d.seeds))} (95% interval {low} to {high}; per seed: {per_seed}; paired t-test {p}); it {spread} the "
        f"seed-to-seed spread ({_size(metric, d.spread)}, the larger std of the two rows)."
    )


def directions_text(runs: pd.DataFrame) -> str:
    """The paragraph README.md puts beside a study's table, or "" when the study has no paired A/J runs."""
    found = paired_differences(runs)
    if not found:
        return ""
    head = (
        f"The paper's directions, J against A paired by seed "
        f"(significant: p < {ALPHA} after Holm's correction for the {len(found)} directions):"
    )
    return "\n".join([head, *(sentence(d, len(found)) for d in found)])
