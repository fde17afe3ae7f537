"""The LLM backend the stage tests run their models on.

llama.cpp where its extra is built (`make llm`; CI builds it), else transformers: a
newcomer's `make test` does not compile llama.cpp, and every stage test still runs on a
real model. Tests of llama.cpp itself use :data:`needs_llamacpp`, which skips with the
command that builds it, or fails where ``TRIBUNAL_REQUIRE_LLAMACPP=1`` (CI) says it must
be there.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

HAS_LLAMACPP = importlib.util.find_spec("llama_cpp") is not None
LLM_BACKEND = "llamacpp" if HAS_LLAMACPP else "transformers"
MISSING = "llama-cpp-python not installed: `make llm` builds it (about 3 minutes)"

if not HAS_LLAMACPP and os.environ.get("TRIBUNAL_REQUIRE_LLAMACPP") == "1":
    raise RuntimeError(f"TRIBUNAL_REQUIRE_LLAMACPP=1 but {MISSING}")

needs_llamacpp = pytest.mark.skipif(not HAS_LLAMACPP, reason=MISSING)
