# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# uv is installed from PyPI when missing; one .venv holds the whole stack.
PYTHON ?= python3
UV := $(PYTHON) -m uv
RUN := HF_HUB_OFFLINE=1 $(UV) run --frozen --no-sync

.PHONY: setup test demo bench clean
setup: .venv/.synced

.venv/.synced: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --frozen
	@touch $@

test: setup
	$(RUN) pytest

demo: setup
	$(RUN) mjp demo

bench: setup
	$(RUN) python benchmarks/bench_mjp.py

clean:
	rm -rf .venv .pytest_cache
