"""Training in plain torch behind Ray Train: what a run is (config), where its images come from (data),
what it records in MLflow (tracking), the paper's evaluations (evaluation), the loop (train) and what
the driver does around a trial (launch); errors.py is every room's floor."""
