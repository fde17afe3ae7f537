"""Tribunal: decide, with evidence, whether a text answers a question.

The package is organised by service (``retrieval``, ``entailment``, ``debate``,
``ensemble``, ``confidence``, ``gateway``) on top of :mod:`tribunal.core`
(settings, errors, logging, model profiles and installation, the gRPC
runtime). Generated protobuf stubs live in :mod:`tribunal.v1`.
"""

__all__ = [
    "__version__",
]

__version__ = "0.1.0"
