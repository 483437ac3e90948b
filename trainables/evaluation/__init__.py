"""The paper's evaluations of a trained model (accuracy under shuffles, robustness, position embeddings, privacy), run at the end of training and by mjp evaluate."""
