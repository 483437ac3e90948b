"""The MLflow gate (``mjp cluster mlflow-gate``): the MLflow server behind the cluster's token, what it
lets through and how it streams (``mlflow_gate.py``), and how it listens (``listener.py``)."""
