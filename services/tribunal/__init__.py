"""Tribunal: decide, with evidence, whether a text answers a question.

The package is organised by service (``retrieval``, ``entailment``, ``debate``,
``ensemble``, ``confidence``, ``gateway``) on top of :mod:`tribunal.core`
(settings, errors, logging, model profiles and installation, the gRPC
runtime). Generated protobuf stubs live in :mod:`tribunal.v1`.
"""

import os

__all__ = [
    "__version__",
]

__version__ = "0.1.0"

# Threads of torch's OpenMP pool wait for each other at every operation. By default they
# spin while waiting; on a machine whose cores other processes also use, a spinning thread
# holds a core the thread it waits for needs, and embedder passes run several times slower
# than with threads that sleep (bench/omp_wait.py measures it side by side). OpenMP reads
# the policy once, when torch loads it: set here, before any Tribunal module imports
# torch, unless the user chose one.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
