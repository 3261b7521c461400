# Every target sets up its own virtual environment from pyproject.toml: two commands on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test system-packages lint typecheck pytest bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet -e ".[all]" --group dev
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/retrymw demo

test: system-packages lint typecheck pytest

# Real Prometheus and Redis servers: installed when root with apt, otherwise the exact command.
system-packages:
	.ci/system-packages

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# -v names each test as it starts, so a long real-component test is never a silent wait;
# --durations lists the slowest, to keep the suite's time in view.
pytest: $(STAMP)
	rm -f .coverage .coverage.*
	$(BIN)/coverage run -m pytest -v --durations=15 $(PYTEST_ARGS)
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report --fail-under=95

bench: $(STAMP)
	$(BIN)/python -m benchmarks --markdown benchmarks/RESULTS.md --readme README.md $(BENCH_ARGS)

# The reference in docs/, built into site/ (git-ignored); --strict turns warnings into errors.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage
