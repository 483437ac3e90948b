# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# uv is installed from PyPI when missing; one .venv holds the whole stack; installs are quiet.
# Bytecode is compiled at install: where PYTHONDONTWRITEBYTECODE is set (CI images, containers)
# Python would otherwise compile torch's, MLflow's and Ray's sources again in every command.
PYTHON ?= python3
UV := $(PYTHON) -m uv
RUN := $(UV) run --frozen --no-sync

.PHONY: setup lint format test test-fast test-cluster test-slurm test-gpu gpu-kit demo bench clean
setup: .venv/.synced

.venv/.synced: pyproject.toml uv.lock Makefile
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install -qq --disable-pip-version-check uv
	@echo "installing the environment into .venv (torch, timm, Ray, MLflow, Optuna; a few minutes the first time) ..."
	@start=$$(date +%s); $(UV) sync --frozen --quiet --compile-bytecode && echo "environment ready in $$(( $$(date +%s) - start )) s"
	@touch $@

# ruff (lint and format, pyproject.toml [tool.ruff]) and mypy (the four packages, [tool.mypy]);
# `make format` rewrites what `make lint` would refuse for its formatting.
lint: setup
	@$(RUN) ruff check .
	@$(RUN) ruff format --check .
	@$(RUN) mypy

format: setup
	@$(RUN) ruff check --fix .
	@$(RUN) ruff format .

# Three test processes (pytest-xdist) on two cores: the end-to-end tests wait on Ray, the twin,
# Slurm and subprocesses part of their time, which the other processes fill (docs/test-suite-runs.md:
# with two, 216 of the cores' 1,780 CPU-s stayed idle); tests/spread.py says which tests share a process
# and hands the longest out first. PYTEST_PROCESSES=0 runs everything in this process.
PYTEST_PROCESSES ?= 3
SPREAD := $(if $(filter 0,$(PYTEST_PROCESSES)),,-n $(PYTEST_PROCESSES) --dist loadgroup --no-loadscope-reorder)

test: setup
	@$(RUN) pytest $(SPREAD) --durations=25

test-fast: setup  # everything but the end-to-end runs through Ray
	@$(RUN) pytest $(SPREAD) -m "not slow"

# The cluster path on the local twin of cluster.yaml (autoscaled fake nodes, an MLflow server):
# docs/cluster-local.md. Part of `make test` too; this runs it alone.
test-cluster: setup
	@$(RUN) pytest -m cluster tests/test_cluster_local.py tests/test_cluster_pasted_docs.py tests/test_cluster_store.py

# A sweep as a Slurm job on a real Slurm the tests start (slurmctld + two slurmd on this host; Debian's
# slurm-wlm): docs/cluster-slurm.md. Part of `make test` too; this runs it alone.
test-slurm: setup
	@$(RUN) pytest -m slurm tests/test_cluster_slurm.py tests/sweep/cluster/slurm

# On a CUDA machine: the `gpu` tests, then the GPU benchmarks, whose tables (naming the GPU) are
# appended to BENCHMARKS-gpu.md. Under 10 minutes on one H100-class GPU.
GPU_BENCH := --device cuda --models deit_small_patch16_224 --batch 256 --amp bf16 --steps 20 --out BENCHMARKS-gpu.md
# MJP_GPU_TEST_DEVICE=cpu make test-gpu: the same tests on the CPU (checks the tests where there is
# no GPU) and bench_data's host budget; what needs CUDA (sync debug mode, nvJPEG, benches) is left out.
test-gpu: setup
ifeq ($(MJP_GPU_TEST_DEVICE),cpu)
	@$(RUN) pytest -m gpu tests/gpu
	@$(RUN) python benchmarks/bench_data.py --device cpu --skip-loaders --images 256
else
	@$(RUN) python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'make test-gpu needs a CUDA device: torch.cuda.is_available() is False')"
	@$(RUN) pytest -m gpu tests/gpu
	@$(RUN) python benchmarks/bench_mjp.py $(GPU_BENCH)
	@$(RUN) python benchmarks/bench_mjp.py $(GPU_BENCH) --compile
	@$(RUN) python benchmarks/bench_data.py --device cuda --skip-loaders --images 256 --out BENCHMARKS-gpu.md
	@$(RUN) python benchmarks/bench_gpu_train.py --steps 100 --warmup 30 --batch 256 --amp bf16 --compile --out BENCHMARKS-gpu.md
endif

# The GPU check for a bare GPU machine (a stock PyTorch image, no registry, a short slot):
# `make gpu-kit` here puts the wheels it needs beyond that image in .gpu-kit/ (uv.lock's versions
# and hashes, at most 32 MiB, MANIFEST.md says why each); copy the tree with it over and run
# `bash benchmarks/gpu_check.sh` there (docs/gpu-check.md). Needs only python3 and the network here.
gpu-kit:
	@$(PYTHON) -m benchmarks.gpu_check.make_kit

# .venv/bin/mjp, not `uv run`: uv passes the terminal's Ctrl-C on to its child, which the terminal
# signals too, and a second SIGINT cuts a sweep's graceful stop short (runs left RUNNING)
demo: setup
	@.venv/bin/mjp demo

bench: setup
	@$(RUN) python benchmarks/bench_mjp.py

clean:
	rm -rf .venv .pytest_cache
