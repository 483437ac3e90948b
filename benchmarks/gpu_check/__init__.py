"""The GPU check's steps, one job per module, each run by ``benchmarks/gpu_check.sh`` as
``python3 -m benchmarks.gpu_check.<step> --mode cuda|cpu --out FILE`` in a process of its own (a
step that fails or hangs costs only itself). Each writes one JSON; ``report.py`` turns them into
the Markdown report. Nothing here imports Ray, MLflow or Optuna: the check runs on a stock PyTorch
image with the few wheels of ``make gpu-kit`` (docs/gpu-check.md)."""
