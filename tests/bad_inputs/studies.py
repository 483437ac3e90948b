"""Bad studies: shipped names, search spaces, objectives, budgets, presets, `--data`, resumes."""

from __future__ import annotations

from tests.bad_inputs_made import study

#: studies and sweep directories
STUDIES = [
    ("study typo", lambda t: ["sweep", "run", "quickstrat"], "did you mean quickstart?"),
    (
        "study low above high",
        lambda t: ["sweep", "run", study(t, space={"mjp.mask_ratio": {"type": "uniform", "low": 0.5, "high": 0.1}})],
        "low=0.5 > high=0.1",
    ),
    (
        "study unknown key",
        lambda t: ["sweep", "run", study(t, space={"optim.epoch": {"type": "choice", "values": [1]}})],
        "space.optim.epoch is not a TrainConfig key (did you mean optim.epochs?)",
    ),
    (
        "study unknown objective",
        lambda t: ["sweep", "run", study(t, objective={"metric": "val/top3"})],
        "objective metric 'val/top3' is not reported by the trainable",
    ),
    (
        "study field typo",
        lambda t: ["sweep", "run", study(t, budget={"trials": 2, "max_concurent": 2})],
        "budget.max_concurent: not a key of this section (got 2) (did you mean budget.max_concurrent?)",
    ),
    ("study samples nothing", lambda t: ["sweep", "run", study(t, budget={"trials": 4})], "every trial would be identical"),
    (
        "preset overrides a sample",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                space={
                    "mjp.mask_ratio": {"type": "choice", "values": [0.3, 0.5]},
                    "setup": {"type": "choice", "values": ["x"], "presets": {"x": {"mjp.mask_ratio": 0.5}}},
                },
            ),
        ],
        "space.setup.presets.x sets mjp.mask_ratio, which space.mjp.mask_ratio also samples",
    ),
    (
        "two presets set one key",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                space={
                    "a": {"type": "choice", "values": ["x"], "presets": {"x": {"optim.base_lr": 0.1}}},
                    "b": {"type": "choice", "values": ["y"], "presets": {"y": {"optim.base_lr": 0.2}}},
                },
            ),
        ],
        "space.a and space.b both have presets that set optim.base_lr",
    ),
    (
        "when value never taken",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                space={
                    "mjp.dal": {"type": "choice", "values": ["none", "mlp"]},
                    "mjp.dal_weight": {"type": "uniform", "low": 0.001, "high": 0.1, "when": {"mjp.dal": ["mpl"]}},
                },
            ),
        ],
        "space.mjp.dal_weight.when.mjp.dal lists ['mpl'], which space.mjp.dal never takes (its values: ['none', 'mlp']) (did you mean "
        "mlp?)",
    ),
    ("data for a bundled study", lambda t: ["sweep", "run", "quickstart", "--data", "/data"], "data.name='digits' is bundled"),
    ("data given twice", lambda t: ["sweep", "run", "fashion", "--data", "/a", "--set", "data.root=/b"], "both give the data root"),
    ("resume of a non-sweep", lambda t: ["sweep", "resume", str(t)], "is not a sweep directory"),
    ("resume of a missing path", lambda t: ["sweep", "resume", str(t / "nope")], "nope does not exist; pass the directory"),
]
