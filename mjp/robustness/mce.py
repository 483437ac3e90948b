"""Mean corruption error (mCE), as the robustness literature and the reference code compute it.

For a corruption c with errors E_c,s at severities s = 1..5, its corruption error is
``CE_c = mean_s E_c,s / mean_s E^ref_c,s`` and ``mCE = 100 x mean_c CE_c``, where the reference
is AlexNet (Hendrycks & Dietterich's normalisation, the convention of the literature), another
model (the study's baseline run, for data that is not ImageNet), or nothing: the unnormalised
mCE ``100 x mean_c mean_s E_c,s`` that the reference MJP code prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mjp.keys import CORRUPTIONS

#: AlexNet's ImageNet-C error per corruption, the mean over the 5 severities (Hendrycks &
#: Dietterich, 2019; as listed in AugMix's ImageNet evaluation code, "taken from
#: github.com/hendrycks/robustness")
ALEXNET_ERRORS: dict[str, float] = dict(
    zip(
        CORRUPTIONS,
        (
            0.886428,
            0.894468,
            0.922640,
            0.819880,
            0.826268,
            0.785948,
            0.798360,
            0.866816,
            0.826572,
            0.819324,
            0.564592,
            0.853204,
            0.646056,
            0.717840,
            0.606500,
        ),
    )
)


def corruption_errors(
    errors: Mapping[str, Sequence[float]], baseline: str | None | Mapping[str, Sequence[float]] = "alexnet"
) -> dict[str, float]:
    """``CE_c`` per corruption (a fraction; 1.0 = as bad as the reference)."""
    out = {}
    for name, values in errors.items():
        mean = float(np.mean(values))
        if baseline is None:
            out[name] = mean
        elif isinstance(baseline, str):
            if baseline != "alexnet":
                raise ValueError(f"baseline={baseline!r}; allowed: 'alexnet', None or a dict of errors like `errors`")
            if name not in ALEXNET_ERRORS:
                raise ValueError(f"no AlexNet error for {name!r}; AlexNet's are known for: {', '.join(CORRUPTIONS)}")
            out[name] = mean / ALEXNET_ERRORS[name]
        else:
            if name not in baseline:
                raise ValueError(f"the baseline has no errors for {name!r}")
            reference = float(np.mean(baseline[name]))
            out[name] = mean / reference if reference > 0 else float("inf")
    return out


def mce(errors: Mapping[str, Sequence[float]], baseline: str | None | Mapping[str, Sequence[float]] = "alexnet") -> float:
    """mCE in percent. ``errors``: corruption -> error fractions at severities 1..5; ``baseline``:
    ``"alexnet"``, None (unnormalised) or a dict like ``errors`` (another model's)."""
    if not errors:
        raise ValueError("no corruption errors given")
    for name, values in errors.items():
        if len(values) != 5:
            raise ValueError(f"{name}: {len(values)} errors given; one per severity 1..5 is expected")
    return 100 * float(np.mean(list(corruption_errors(errors, baseline).values())))
