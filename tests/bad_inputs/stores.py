"""Bad MLflow stores: missing, misspelt, damaged or empty, and the commands that read them."""

from __future__ import annotations

from tests.bad_inputs import TRAIN
from tests.bad_inputs_made import damaged_store, empty_store, mlflow_store, write

#: stores that are missing or misspelt, and what the commands reading them are asked
STORES = [
    (
        "store in a missing directory",
        lambda t: TRAIN + ["--set", f"tracking.uri=sqlite:///{t}/missing/x.db"],
        "cannot create the MLflow store",
    ),
    ("misspelt store scheme", lambda t: TRAIN + ["--set", f"tracking.uri=sqlte:///{t}/x.db"], "tracking URI 'sqlte:///"),
    (
        "misspelt store scheme in a sweep",
        lambda t: ["sweep", "run", "quickstart", "--set", f"tracking.uri=sqlte:///{t}/x.db"],
        "MLflow cannot open a 'sqlte://' store (did you mean sqlite://?); allowed: sqlite://",
    ),
    ("misspelt store scheme for status", lambda t: ["sweep", "status", "--uri", "htp://localhost:5000"], "(did you mean http://?)"),
    (
        "status of a misspelt study",
        lambda t: ["sweep", "status", "--study", "quickstrat", "--uri", mlflow_store(t)],
        "study 'quickstrat' is neither a shipped study nor one with sweeps in",
    ),
    (
        "a report --out that cannot be written",
        lambda t: ["analyze", "report", "--study", "quickstart", "--uri", mlflow_store(t), "--out", write(t / "a-file", "x")],
        "cannot write the report to",
    ),
    ("analyze a misspelt study", lambda t: ["analyze", "tables", "--study", "fashon", "--uri", mlflow_store(t)], "(did you mean fashion?)"),
    (
        "analyze a study that does not exist",
        lambda t: ["analyze", "report", "--study", "nosuch", "--uri", mlflow_store(t)],
        "study 'nosuch' is neither a shipped study nor one with sweeps in",
    ),
    ("status of a missing store", lambda t: ["sweep", "status", "--uri", f"sqlite:///{t}/missing/x.db"], "no MLflow store at"),
    (
        "tables of a study never run",
        lambda t: ["analyze", "tables", "--study", "quickstart", "--uri", mlflow_store(t)],
        "no sweep of study 'quickstart'",
    ),
    (
        "attack an unknown run",
        lambda t: ["attack", "--run", "0123456789abcdef", "--uri", mlflow_store(t)],
        "no MLflow run with id '0123456789abcdef'",
    ),
]

#: stores that are damaged or empty
DAMAGED_STORES = [
    ("status of a damaged store", lambda t: ["sweep", "status", "--uri", damaged_store(t)], "/mlflow.db is damaged ("),
    (
        "report of a damaged store",
        lambda t: ["analyze", "report", "--study", "quickstart", "--uri", damaged_store(t)],
        "/mlflow.db is damaged (",
    ),
    (
        "sweep into a damaged store",
        lambda t: ["sweep", "run", "quickstart", "--smoke", "--set", f"tracking.uri={damaged_store(t)}"],
        "/mlflow.db is damaged (",
    ),
    (
        "status of an empty store",
        lambda t: ["sweep", "status", "--uri", empty_store(t)],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    (
        "report of an empty store",
        lambda t: ["analyze", "report", "--study", "quickstart", "--uri", empty_store(t)],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    (
        "sweep into an empty store",
        lambda t: ["sweep", "run", "quickstart", "--smoke", "--set", f"tracking.uri={empty_store(t)}"],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    (
        "results of an empty store",
        lambda t: ["analyze", "results", "--study", "quickstart", "--uri", empty_store(t)],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
]
