"""Training in plain torch: the model and the DeiT recipe, one epoch, checkpoints, the loop each worker runs
behind a session, and loading a trained model back."""
