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
# `make bench`: sizes of the cluster benchmark (small: 100 nodes / 1000 pods, large: 1000 /
# 5000, xl: 5000 / 10000; both = small,large; all = small,large,xl; or a list), where the
# report goes, how many times each pair at the shipped client defaults runs (their p99s
# differ from run to run by more than the schedulers do; the ratios take the medians), how
# many times each throughput pair with the equal client or a backlog runs (one pair's ratio
# moves by a third on 2 cores), extra flags for benchmarks/cluster_bench.py.
BENCH_SIZE ?= all
BENCH_OUT ?= benchmarks/results/latest
BENCH_PACED_REPEAT ?= 3
BENCH_UNTHROTTLED_REPEAT ?= 3
BENCH_ARGS ?=
# The container image and the kind path (docs/deploy.md).
IMAGE ?= py-scheduler:dev
DOCKER ?= docker
KIND ?= kind
KIND_CLUSTER ?= py-scheduler
KUBECTL ?= kubectl
CACHE_DIR ?= $(or $(PY_SCHEDULER_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/py-scheduler)
KIND_KUBECONFIG ?= $(CACHE_DIR)/kind-$(KIND_CLUSTER).kubeconfig
# `make image` also saves the image here (`docker save`), for the real node's containerd.
IMAGE_TAR ?= $(CACHE_DIR)/images/py-scheduler-dev.tar
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Fails with a clear message when Docker (CLI and engine), kind or kubectl is missing.
REQUIRE := DOCKER='$(DOCKER)' KIND='$(KIND)' KUBECTL='$(KUBECTL)' hack/require.sh

.PHONY: help install lint typecheck imports unit e2e test cluster-up cluster-down \
        cluster-status binaries run bench clean deploy-check lock image kind-up kind-load \
        deploy undeploy e2e-kind

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "py-scheduler needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed ## create .venv and install py-scheduler editable with dev deps

lint: install ## ruff
	$(VENV)/bin/ruff check scheduler tests hack benchmarks examples
	$(VENV)/bin/ruff format --check scheduler tests hack benchmarks examples

typecheck: install ## mypy --strict on scheduler/
	$(VENV)/bin/mypy scheduler

imports: install ## import-layer contracts (import-linter)
	$(VENV)/bin/lint-imports

unit: install ## unit and property tests (no cluster)
	$(VENV)/bin/pytest -q tests/unit tests/property examples/plugins

binaries: install ## build or reuse etcd, kube-apiserver, ... kwok (cached outside the repo)
	hack/build-k8s.sh

e2e: install binaries ## e2e suite against the local control plane (or E2E_KUBECONFIG)
	$(VENV)/bin/pytest -q -m e2e tests/e2e

deploy-check: install ## manifests/Dockerfile checks + the image's pip install replayed (PyPI)
	$(VENV)/bin/pytest -q tests/deploy

test: lint typecheck imports unit deploy-check e2e ## THE test command: lint, types, layers, unit, deploy, e2e

cluster-up: install binaries ## start the local control plane with $(RUN_NODES) kwok nodes (REAL_NODE=1: + a kubelet node)
	$(if $(REAL_NODE),hack/node-deps.sh && hack/build-k8s.sh kubelet >/dev/null &&) \
	  $(CLUSTER) up --nodes $(RUN_NODES) $(if $(REAL_NODE),--real-node)

cluster-down: install ## stop the local control plane and remove its state
	$(CLUSTER) down

cluster-status: install ## show the local control plane, its kubeconfig and log directory
	$(CLUSTER) status

run: install ## run the scheduler (local control plane unless KUBECONFIG is set)
	@if [[ -z "$${KUBECONFIG:-}" ]]; then \
	  $(MAKE) --no-print-directory cluster-up; \
	  export KUBECONFIG=$$($(CLUSTER) kubeconfig); \
	  echo "kubeconfig: $$KUBECONFIG"; \
	  echo "try:        kubectl --kubeconfig $$KUBECONFIG apply -f manifests/examples/priorityclasses.yaml -f manifests/examples/deployment.yaml"; \
	  echo "            (then the walkthrough in manifests/examples/README.md)"; \
	  exec $(VENV)/bin/py-scheduler run --kubeconfig "$$KUBECONFIG" --no-leader-elect -v 2; \
	else \
	  exec $(VENV)/bin/py-scheduler run --kubeconfig "$$KUBECONFIG" -v 2; \
	fi

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench: install binaries $(VENV)/.bench-installed ## in-process core + cluster vs kube-scheduler (BENCH_SIZE=small|large|xl|both|all or a list)
	@mkdir -p $(BENCH_OUT)
	$(PY) benchmarks/core_bench.py --json $(BENCH_OUT)/core.json
	$(PY) benchmarks/cluster_bench.py --size $(BENCH_SIZE) --out $(BENCH_OUT) \
	  --core-json $(BENCH_OUT)/core.json --paced-repeat $(BENCH_PACED_REPEAT) \
	  --unthrottled-repeat $(BENCH_UNTHROTTLED_REPEAT) $(BENCH_ARGS)

lock: ## re-resolve requirements.lock (the image's pinned deps) from pyproject (PyPI)
	PYTHON='$(PYTHON)' hack/lock.sh

image: install ## build the image py-scheduler:dev (IMAGE=...; installs/starts Docker if needed)
	PIP='$(PY) -m pip' DOCKER='$(DOCKER)' hack/image.sh '$(IMAGE)' '$(VERSION)' '$(REVISION)' \
	  '$(IMAGE_TAR)'

kind-up: ## create the kind cluster py-scheduler (KIND_CLUSTER=...; needs Docker, kind)
	@$(REQUIRE) docker kind
	@if $(KIND) get clusters 2>/dev/null | grep -qx '$(KIND_CLUSTER)'; then \
	  echo "kind cluster $(KIND_CLUSTER) already exists"; \
	else \
	  $(KIND) create cluster --name $(KIND_CLUSTER); \
	fi

kind-load: ## load the image into the kind cluster's nodes (needs Docker, kind)
	@$(REQUIRE) docker kind
	$(KIND) load docker-image $(IMAGE) --name $(KIND_CLUSTER)

deploy: ## kubectl apply -k manifests (kube-system of kubectl's current context)
	@$(REQUIRE) kubectl
	$(KUBECTL) apply -k manifests

undeploy: ## kubectl delete -k manifests (the default scheduler is never touched)
	@$(REQUIRE) kubectl
	$(KUBECTL) delete -k manifests --ignore-not-found

e2e-kind: install binaries ## image, kind-up, kind-load, deploy, then e2e against kind (+kwok)
	@$(REQUIRE) docker kind
	@$(MAKE) --no-print-directory image
	@$(MAKE) --no-print-directory kind-up
	@$(MAKE) --no-print-directory kind-load
	KIND='$(KIND)' KIND_CLUSTER='$(KIND_CLUSTER)' KIND_KUBECONFIG='$(KIND_KUBECONFIG)' \
	  PY='$(PY)' hack/e2e-kind.sh

clean: ## remove the venv and caches in the repo (not the binary cache)
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
