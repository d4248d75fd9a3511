# The two commands a newcomer needs: `make reproduce` (the main job) and `make check` (the tests).
# Each creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SCALE  ?= default
SEED   ?= 0

.PHONY: all venv proofs explore check lint test reproduce figures bench clean

all: check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

proofs: venv
	$(BIN)/python -m proofs

explore: venv
	$(BIN)/python -m model.explore --max-nodes 4 --json

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: venv
	$(BIN)/python -m pytest -n 2

check: venv lint proofs test
	@echo "make check: proofs and tests passed"

bench: venv
	$(BIN)/python -m bench --json

reproduce: venv
	$(BIN)/python -m proofs --json --out results/proofs/proofs.json
	$(BIN)/python -m experiments.bounds --scale $(SCALE) --seed $(SEED) --json
	rm -rf results/examples && mkdir -p results/examples
	$(BIN)/loopproof run examples/pipeline/graph.toml --ledger results/examples/pipeline.jsonl --json
	$(BIN)/loopproof run examples/repair/graph.toml --ledger results/examples/repair.jsonl --json
	$(BIN)/loopproof run examples/budget/graph.toml --ledger results/examples/budget.jsonl --json || test $$? -eq 4
	$(BIN)/loopproof run examples/regress-restore/graph.toml --ledger results/examples/regress-restore.jsonl --json
	$(BIN)/python -m experiments.integrity --scale $(SCALE) --seed $(SEED) --json
	$(BIN)/python -m experiments.crash --scale $(SCALE) --seed $(SEED) --json
	$(BIN)/python -m experiments.transition --scale $(SCALE) --seed $(SEED) --json
	$(BIN)/python -m experiments.mutants --scale $(SCALE) --seed $(SEED) --json
	$(BIN)/python -m bench --json
	$(MAKE) figures
	@echo "make reproduce: results and figures written to results/"

# Each notebook reads results/<name>/ and saves its figure there; the notebooks in git stay unexecuted.
figures: venv
	cd notebooks && for nb in bounds crash mutants transition; do \
	  LOOPPROOF_RESULTS=$(CURDIR)/results MPLBACKEND=Agg ../$(BIN)/jupyter-execute $$nb.ipynb || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
