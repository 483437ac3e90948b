"""MLflow: the names writers and readers share (schema.py, no mlflow import), the store, one run addressed by id,
what a training writes each epoch, and how runs are named."""
