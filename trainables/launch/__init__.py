"""What the driver does around a trial: pre-flight checks, the Tune trial function and its MLflow run, starting Ray
and cleaning up after it."""
