"""The names a run is written and read by: one spelling (trainables/tracking/schema.py) for the
writers and analysis, and the sweep's parent-run params as one typed record."""

import ast
from pathlib import Path

from trainables.tracking import schema

ROOT = Path(__file__).resolve().parents[3]


def test_sweep_params_round_trip_through_mlflow_s_strings():
    params = schema.SweepParams(
        study="tune",
        search_algorithm="tpe",
        search_seed=0,
        objectives=(("val/top1", "max"), ("val/consistency", "max")),
        trials=16,
        max_concurrent=2,
        scheduler="asha",
        smoke=True,
        space=("mjp.mask_ratio", "mjp.dal"),
        experiment_dir="/r/tune-1",
        paper_tables=("3", "4"),
    )
    strings = params.to_params()
    assert all(isinstance(v, str) for v in strings.values())
    assert strings["objectives"] == "val/top1:max,val/consistency:max" and strings["search.algorithm"] == "tpe"
    assert schema.SweepParams.from_params(strings) == params
    older = schema.SweepParams.from_params({"study": "q", "trials": "4"})  # a parent run with fewer params
    assert (older.study, older.trials, older.objectives, older.paper_tables, older.smoke) == ("q", 4, (), (), False)


def test_no_mlflow_tag_is_spelled_outside_the_schema():
    """Every ``mjp.*`` / ``mlflow.*`` tag literal in the code lives in schema.py (the metric keys
    and config keys, such as ``mjp.mask_ratio``, are not tags and may appear anywhere)."""
    tags = {v for k, v in vars(schema).items() if k.startswith("TAG_") and isinstance(v, str)} - {"mjp.variant"}  # also the config key
    spelled = []
    for path in [*ROOT.glob("sweep/**/*.py"), *ROOT.glob("trainables/**/*.py"), *ROOT.glob("analysis/**/*.py")]:
        if path.name == "schema.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in tags:
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert spelled == []
