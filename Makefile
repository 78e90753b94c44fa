PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint layers types docs bench reproduce advise-docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/recsync train

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks experiments docgen
	$(BIN)/ruff format --check src tests benchmarks experiments docgen

layers: $(STAMP)
	$(BIN)/lint-imports

types: $(STAMP)
	$(BIN)/mypy

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# two pytest workers: one runs the engine tests (one Ray at a time), the other the rest
test: lint layers types docs
	$(BIN)/python -m pytest -q --durations=20 -n 2 --dist loadgroup

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not engine and not long" -n 2

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_step.py
	$(BIN)/python benchmarks/bench_embedding.py

# every reproduction whose report is not current (hours in all); resumes where it stopped;
# then the site, whose results pages and claims table are rendered from what they wrote
JOBS ?= 2
reproduce: $(STAMP)
	$(BIN)/recsync reproduce --all --jobs $(JOBS)
	$(MAKE) docs

# `recsync advise` on the default job for each cluster of docgen/advise_runs.py (minutes
# each; a rerun measures only what changed), then the site, whose "Choosing a strategy"
# page renders them (reports/advise/README.md)
advise-docs: $(STAMP)
	nice -n 19 $(BIN)/python docgen/advise_runs.py
	$(MAKE) docs

clean:
	rm -rf $(VENV) runs site
