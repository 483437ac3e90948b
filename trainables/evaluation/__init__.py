"""The paper's evaluations of a trained model (accuracy under shuffles, robustness, position embeddings,
privacy), listed once in registry.py, run at the end of training and by mjp evaluate."""
