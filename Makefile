# Tribunal — the commands a newcomer needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= tiny
# Ray writes logs under its temp dir; keep them in the build area.
export RAY_TMPDIR ?= $(CURDIR)/.build/ray
# llama-cpp-python compiles llama.cpp from source (~6-10 min on 2 cores; pip caches the
# wheel). Not -march=native: these VMs advertise AMX but fault on its first tile
# instruction (SIGSEGV in ggml_backend_amx_mul_mat), so build for AVX2 explicitly.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

.DEFAULT_GOAL := help
.PHONY: help install models demo test test-fast lint format protos protos-check bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -e '.[dev,llamacpp]'
	touch $@

install: $(BIN)/.installed ## create .venv and install Tribunal with its dev tools

models: install ## install the profile's offline model weights (PROFILE=tiny), verified by sha256
	$(BIN)/tribunal models install --profile $(PROFILE)

demo: models ## the main job: install everything, fetch the tiny models, load and probe them
	$(BIN)/tribunal models list --profile $(PROFILE)
	$(BIN)/tribunal models check --profile $(PROFILE)

test: models ## run the test suite (real models, real gRPC servers, PostgreSQL at 127.0.0.1)
	$(BIN)/pytest -q

test-fast: install ## tests that need no model weights
	$(BIN)/pytest -q -m "not models"

lint: install ## ruff (lint + format check), mypy on services/, buf lint on protos/
	$(BIN)/ruff check services tests bench
	$(BIN)/ruff format --check services tests bench
	$(BIN)/mypy services
	cd protos && ../$(BIN)/buf lint

format: install ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix services tests bench
	$(BIN)/ruff format services tests bench

protos: install ## regenerate services/tribunal/v1 from protos/ (commit the result)
	$(BIN)/python -m tribunal.protogen services

protos-check: install ## fail if the committed stubs differ from a fresh generation
	$(BIN)/python -m tribunal.protogen --check services

bench: install ## benchmarks: ratios measured side by side in one run
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean: ## remove build outputs (not the model cache)
	rm -rf .build .pytest_cache .mypy_cache .ruff_cache
