# py-scheduler developer commands. Every target is described in README.md.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLUSTER := $(PY) hack/localcluster.py
# Fake nodes that `make run` and `make cluster-up` create in the local control plane.
RUN_NODES ?= 3

.PHONY: help install lint typecheck imports unit e2e test cluster-up cluster-down \
        cluster-status binaries run bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "py-scheduler needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed ## create .venv and install py-scheduler editable with dev deps

lint: install ## ruff
	$(VENV)/bin/ruff check scheduler tests hack benchmarks
	$(VENV)/bin/ruff format --check scheduler tests hack benchmarks

typecheck: install ## mypy --strict on scheduler/
	$(VENV)/bin/mypy scheduler

imports: install ## import-layer contracts (import-linter)
	$(VENV)/bin/lint-imports

unit: install ## unit and property tests (no cluster)
	$(VENV)/bin/pytest -q tests/unit tests/property

binaries: install ## build or reuse etcd, kube-apiserver, ... kwok (cached outside the repo)
	hack/build-k8s.sh

e2e: install binaries ## e2e suite against the local control plane (or E2E_KUBECONFIG)
	$(VENV)/bin/pytest -q -m e2e tests/e2e

test: lint typecheck imports unit e2e ## THE test command: lint, types, layers, unit, e2e

cluster-up: install binaries ## start the local control plane with $(RUN_NODES) kwok nodes
	$(CLUSTER) up --nodes $(RUN_NODES)

cluster-down: install ## stop the local control plane and remove its state
	$(CLUSTER) down

cluster-status: install ## show the local control plane, its kubeconfig and log directory
	$(CLUSTER) status

run: install ## run the scheduler (local control plane unless KUBECONFIG is set)
	@if [[ -z "$${KUBECONFIG:-}" ]]; then \
	  $(MAKE) --no-print-directory cluster-up; \
	  export KUBECONFIG=$$($(CLUSTER) kubeconfig); \
	  echo "kubeconfig: $$KUBECONFIG"; \
	  echo "try:        kubectl --kubeconfig $$KUBECONFIG apply -f manifests/examples/"; \
	  exec $(VENV)/bin/py-scheduler run --kubeconfig "$$KUBECONFIG" --no-leader-elect; \
	else \
	  exec $(VENV)/bin/py-scheduler run --kubeconfig "$$KUBECONFIG"; \
	fi

bench: install binaries ## benchmarks (in-process core; see docs/benchmarks.md)
	$(PY) benchmarks/core_bench.py

clean: ## remove the venv and caches in the repo (not the binary cache)
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
