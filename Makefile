# proofswarm — the two commands: `make demo` and `make test`.
# Every target installs what it needs (project-local venv, pinned Node packages, Kubo).
SHELL := /bin/bash
PY := .venv/bin/python
KUBO_VERSION := v0.42.0
FORGE := node_modules/.bin/forge
SLITHER_VERSION := 0.11.6
SLITHER := .tools/slither-$(SLITHER_VERSION)/bin/slither
ENVIRONMENTS := environments/digit_sort
VENV_STAMP := .venv/.installed-$(shell cat pyproject.toml $(addsuffix /pyproject.toml,$(ENVIRONMENTS)) | sha256sum | cut -c1-12)
NODE_STAMP := node_modules/.installed-$(shell sha256sum package-lock.json | cut -c1-12)
KUBO := .tools/bin/ipfs-$(KUBO_VERSION)
GETH_VERSION := v1.17.10
GETH := .tools/bin/geth-$(GETH_VERSION)

export PATH := $(CURDIR)/node_modules/.bin:$(CURDIR)/.tools/bin:$(PATH)
export PROOFSWARM_IPFS_BIN := $(CURDIR)/$(KUBO)
export PROOFSWARM_GETH_BIN := $(CURDIR)/$(GETH)

.PHONY: demo test test-unit install contracts test-forge test-py bench clean chromium

install: $(VENV_STAMP) $(NODE_STAMP) $(KUBO) contracts chromium

# envs: verifiers, and the environments built in this repo (each its own package, pinned by a run spec's version)
$(VENV_STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(ENVIRONMENTS))
	@test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench,envs]' $(addprefix -e ,$(ENVIRONMENTS))
	@rm -f .venv/.installed-* && touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@rm -f node_modules/.installed-* && touch $@

# Slither lives in its own venv: it pins web3 < 8, the project pins web3 8.
$(SLITHER):
	python3 -m venv .tools/slither-$(SLITHER_VERSION)
	.tools/slither-$(SLITHER_VERSION)/bin/python -m pip install -q slither-analyzer==$(SLITHER_VERSION)

$(KUBO):
	scripts/install_kubo.sh $(KUBO_VERSION) $@

# geth, the production client tests/e2e/test_geth.py runs the protocol on (only `make test` needs it). A machine that
# cannot build it still tests everything else: that one test skips, saying why.
$(GETH):
	scripts/install_geth.sh $(GETH_VERSION) $@ || echo "geth $(GETH_VERSION) not built: tests/e2e/test_geth.py will skip"

# Headless Chromium + chromedriver for the explorer's browser test (skips when already installed).
chromium:
	@scripts/install_chromium.sh

# Compile the contracts, then regenerate ledger_client/chain/abi/*.json, bindings.py and contract_errors.py.
contracts: $(NODE_STAMP) $(VENV_STAMP)
	cd contracts && ../$(FORGE) build --quiet
	$(PY) -m ledger_client.chain.codegen contracts/out

demo: install
	$(PY) -m examples.demo

# Test modules run in parallel, one per worker (many tests wait on blocks, daemons and subprocesses, not the CPU; six
# workers were slower than four on two cores: docs/notes/suite-time.md); --durations lists the slowest tests at the end
# of every run, so a slower suite shows where its time went.
TEST_WORKERS ?= 4

# Slither fails the build on any high-severity finding in contracts/src (libraries and tests filtered out); ruff on
# any Python bug its small rule set finds (pyproject.toml, [tool.ruff.lint]).
test: install $(SLITHER) $(GETH)
	cd contracts && ../$(FORGE) test
	cd contracts && ../$(SLITHER) . --filter-paths "lib/|test/" --fail-high
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40

# The unit tier alone: tests/unit/ (one folder per room; no anvil, no Kubo: tests/test_architecture.py holds it to
# that) and the room table, in one process (two xdist workers import torch twice: slower on 2 cores); the Python
# venv is all it installs.
test-unit: $(VENV_STAMP)
	$(PY) -m pytest -q tests/unit tests/test_architecture.py

bench: install
	$(PY) -m bench.gas

clean:
	rm -rf contracts/out contracts/cache .devnet runs
