# Tribunal — the commands a newcomer needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= tiny
# The COVID-QA data the demo reads (FAQ + real users' paraphrases); DATA=DIR elsewhere.
DATA ?= ../shared/data/covid-qa
# Ray writes logs under its temp dir; keep them in the build area.
export RAY_TMPDIR ?= $(CURDIR)/.build/ray
# Python keeps the bytecode it compiles on first import (in .venv's __pycache__), even
# where the environment says not to: otherwise every process (each test's subprocess,
# each Ray worker, each CLI run) compiles torch, transformers and Ray again, 26 s against
# 8 s for importing them on this machine.
unexport PYTHONDONTWRITEBYTECODE
# llama-cpp-python (the llamacpp extra: `make llm`; CI builds it) compiles llama.cpp from
# source (~3 min on 2 idle cores; pip caches the wheel). Not -march=native: these VMs
# advertise AMX but fault on its first tile instruction (SIGSEGV in
# ggml_backend_amx_mul_mat), so build for AVX2 explicitly. LLAVA_BUILD=OFF: no multimodal
# library (Tribunal runs text models only; llama_cpp loads it only for image chat), 13%
# less compile time (169 s against 195 s on 2 idle cores).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF

.DEFAULT_GOAL := help
.PHONY: help install models demo-models llm demo test test-all test-fast fuzz lint format protos protos-check bench serve serve-stop clean k8s-check k8s-manifests browser

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# Two install sets, each with its own stamp, so neither reinstalls what the other did:
# the runtime (what `make demo` runs: Tribunal and FAISS for the CPU, no compiler, no
# dev tools), and on top of it the dev set (`make install`, `make test`): the extras that
# install as wheels (review, k8s, analysis, tune), the lab and the test and lint tools.
# The llamacpp extra compiles, so it is `make llm`'s; without it the tests run their
# LLMs on transformers and skip the llama.cpp engine's own tests. --no-compile:
# Python compiles what it imports when it first imports it (and keeps it, see above), not
# all of torch and Ray now.
$(BIN)/.installed-runtime: pyproject.toml
	@echo "== [install] .venv with Tribunal's runtime and FAISS for the CPU"
	@started=$$(date +%s); \
	  $(PYTHON) -m venv $(VENV) && \
	  $(BIN)/pip install --quiet --upgrade pip && \
	  $(BIN)/pip install --progress-bar off --no-compile -e '.[cpu]' && \
	  echo "== [install] runtime done in $$(( $$(date +%s) - started )) s"
	touch $@

$(BIN)/.installed-dev: $(BIN)/.installed-runtime pyproject.toml
	@echo "== [install] the dev set: the extras, the lab, test and lint tools (llama.cpp: make llm)"
	@started=$$(date +%s); \
	  $(BIN)/pip install --progress-bar off --no-compile -e '.[dev]' && \
	  echo "== [install] dev set done in $$(( $$(date +%s) - started )) s"
	touch $@

install: $(BIN)/.installed-dev ## create .venv and install Tribunal, its lab and dev tools

models: $(BIN)/.installed-runtime ## every non-optional model weight of the profile (PROFILE=tiny), the LLMs included (converted for transformers), sha256-checked
	$(BIN)/tribunal models install --profile $(PROFILE) --with-llms

demo-models: $(BIN)/.installed-runtime
	$(BIN)/tribunal models install --profile $(PROFILE)

llm: $(BIN)/.installed-runtime ## the llama.cpp backend (compiled, ~3 min) and the LLM weights; the tests then run on it
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --progress-bar off --no-compile -e '.[llamacpp]'
	$(BIN)/tribunal models install --profile $(PROFILE) --with-llms

demo: demo-models ## the main job: install the runtime and the models it uses, build the COVID FAQ KB, answer
	$(BIN)/tribunal demo --profile $(PROFILE) --data $(DATA)

# Two test processes (pytest-xdist): while one waits on a Ray start, a subprocess or a
# server, the other runs; tests that start a Ray share one process (see tests/conftest.py).
TEST_WORKERS ?= 2
test: install models ## the test suite CI runs (real models, gRPC, Ray, PostgreSQL at 127.0.0.1; no sudo)
	$(BIN)/pytest -q -m "not extended" -n $(TEST_WORKERS) --dist loadgroup --durations=25

test-all: install models ## every test, including the `extended` ones CI covers more broadly
	$(BIN)/pytest -q

test-fast: install ## tests that need no model weights
	$(BIN)/pytest -q -m "not models"

# Every RPC of every service, fuzzed (the same test `make test` runs with 200 requests).
FUZZ_N ?= 1000
FUZZ_SEED ?= 20261201
fuzz: install models ## fuzz every RPC of every service: FUZZ_N requests each (default 1000), figures in .build/fuzz/report.json
	FUZZ_N=$(FUZZ_N) FUZZ_SEED=$(FUZZ_SEED) FUZZ_REPORT=.build/fuzz/report.json \
	  $(BIN)/pytest -q -s -m fuzz tests/integration/test_fuzz.py

# The review page's browser test drives Debian's chromium through Playwright
# (executable_path): never `playwright install`, which downloads its own build. The test
# skips, saying so, where chromium is absent; CI (.ci/run) installs it.
browser: ## Debian's chromium for the review page's browser test (apt, once; may ask for sudo)
	@command -v chromium >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y --no-install-recommends chromium; }

lint: install ## ruff (lint + format check), mypy on services/ and lab/, buf lint on protos/
	$(BIN)/ruff check services lab tests bench loadtest
	$(BIN)/ruff format --check services lab tests bench loadtest
	$(BIN)/mypy services lab
	cd protos && ../$(BIN)/buf lint

format: install ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix services lab tests bench loadtest
	$(BIN)/ruff format services lab tests bench loadtest

protos: install ## regenerate services/tribunal/v1 from protos/ (commit the result)
	$(BIN)/python -m tribunal.protogen services

protos-check: install ## fail if the committed stubs differ from a fresh generation
	$(BIN)/python -m tribunal.protogen --check services

bench: install ## benchmarks: ratios measured side by side in one run
	@for script in bench/[!_]*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# The whole stack on a local Ray Serve: `tribunal serve deploy` runs in the background
# (pid in .build/serve/pid, log in .build/serve/log) and owns its Ray, so serve-stop
# ends exactly that cluster (never `ray stop`, which would end every Ray on the machine).
SERVE_DIR ?= .build/serve
SERVE_ARGS ?= --set llm.n_threads=1
# Ray's token auth, every Ray port on loopback (RAY_HOST=<address> opens them to the
# network), Serve's gRPC proxy behind mutual TLS (client files in $(RAY_TMPDIR)/tls).
RAY_AUTH ?= token
RAY_HOST ?= 127.0.0.1
SERVE_TLS ?= mutual
SERVE_WAIT ?= 900

serve: install ## run every service on a local Ray Serve (gRPC proxy 127.0.0.1:9000, metadata application: gateway)
	@mkdir -p $(SERVE_DIR)
	@if [ -f $(SERVE_DIR)/pid ] && kill -0 $$(cat $(SERVE_DIR)/pid) 2>/dev/null; then \
	  echo "already running (pid $$(cat $(SERVE_DIR)/pid)): make serve-stop first"; exit 1; fi
	$(BIN)/tribunal serve config --profile $(PROFILE) -o $(SERVE_DIR)/serve.yaml $(SERVE_ARGS)
	rm -f $(SERVE_DIR)/ready.json
	nohup $(BIN)/tribunal --log-level INFO serve deploy --config $(SERVE_DIR)/serve.yaml \
	  --ray-auth $(RAY_AUTH) --ray-host $(RAY_HOST) --tls $(SERVE_TLS) \
	  --ready-file $(SERVE_DIR)/ready.json > $(SERVE_DIR)/log 2>&1 & \
	  echo $$! > $(SERVE_DIR)/pid
	@echo "deploying (pid $$(cat $(SERVE_DIR)/pid), log $(SERVE_DIR)/log) ..."
	@for i in $$(seq 1 $(SERVE_WAIT)); do \
	  if [ -f $(SERVE_DIR)/ready.json ]; then head -c 400 $(SERVE_DIR)/ready.json; echo; exit 0; fi; \
	  if ! kill -0 $$(cat $(SERVE_DIR)/pid) 2>/dev/null; then \
	    echo "tribunal serve deploy exited: $(SERVE_DIR)/log"; tail -n 20 $(SERVE_DIR)/log; \
	    rm -f $(SERVE_DIR)/pid; exit 1; fi; \
	  sleep 1; done; echo "not running after $(SERVE_WAIT) s: $(SERVE_DIR)/log"; exit 1

serve-stop: ## stop what `make serve` started (Serve, then its own Ray)
	@if [ ! -f $(SERVE_DIR)/pid ]; then echo "nothing to stop ($(SERVE_DIR)/pid is absent)"; exit 0; fi
	@pid=$$(cat $(SERVE_DIR)/pid); kill -TERM $$pid 2>/dev/null || true; \
	  for i in $$(seq 1 90); do kill -0 $$pid 2>/dev/null || break; sleep 1; done; \
	  if kill -0 $$pid 2>/dev/null; then echo "pid $$pid still running after 90 s"; exit 1; fi; \
	  rm -f $(SERVE_DIR)/pid $(SERVE_DIR)/ready.json; echo "stopped (pid $$pid)"

# checkov pins packaging 23.2, networkx 2.6.3 and python-dateutil 2.9, older than the
# project's stack (torch, ray): it gets its own venv rather than downgrading .venv. The
# venv lives in the user cache (like the models), so a fresh clone reuses it: installing
# it takes minutes, the checks themselves ~25 s.
CHECKOV_VENV ?= $(HOME)/.cache/tribunal/checkov-3.3.30
$(CHECKOV_VENV)/bin/checkov:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==3.3.30

k8s-check: install $(CHECKOV_VENV)/bin/checkov ## offline checks of charts/ and k8s/ (K8S_VALUES=more values files)
	$(BIN)/python -m tribunal_lab.k8s_check --checkov $(CHECKOV_VENV)/bin/checkov \
	  $(foreach file,$(K8S_VALUES),--values $(file))

k8s-manifests: install ## regenerate k8s/ (kustomize base + overlays) from charts/tribunal
	$(BIN)/python -m tribunal_lab.k8s_check --write-manifests

clean: ## remove build outputs (not the model cache)
	rm -rf .build .pytest_cache .mypy_cache .ruff_cache
