# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# uv is installed from PyPI when missing; one .venv holds the whole stack; installs are quiet.
# Bytecode is compiled at install: where PYTHONDONTWRITEBYTECODE is set (CI images, containers)
# Python would otherwise compile torch's, MLflow's and Ray's sources again in every command.
PYTHON ?= python3
UV := $(PYTHON) -m uv
RUN := $(UV) run --frozen --no-sync

.PHONY: setup test test-fast demo bench clean
setup: .venv/.synced

.venv/.synced: pyproject.toml uv.lock Makefile
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install -qq --disable-pip-version-check uv
	@echo "installing the environment into .venv (torch, timm, Ray, MLflow, Optuna; a few minutes the first time) ..."
	@start=$$(date +%s); $(UV) sync --frozen --quiet --compile-bytecode && echo "environment ready in $$(( $$(date +%s) - start )) s"
	@touch $@

test: setup
	@$(RUN) pytest

test-fast: setup  # everything but the end-to-end runs through Ray
	@$(RUN) pytest -m "not slow"

demo: setup
	@$(RUN) mjp demo

bench: setup
	@$(RUN) python benchmarks/bench_mjp.py

clean:
	rm -rf .venv .pytest_cache
