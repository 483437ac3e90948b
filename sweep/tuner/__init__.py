"""A study run as a Ray Tune experiment: its signed state file, where its files live, the Tuner,
launch and resume, the callbacks its driver attaches, the MLflow records of its trials, its
outcome, the Optuna mirror, and one training as a one-trial Tune run."""
