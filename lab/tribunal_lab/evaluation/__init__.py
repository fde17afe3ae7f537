"""Evaluation runners on the development data sets: each a module with
``add_arguments(parser)`` and ``run(args)``, run as ``tribunal-lab eval NAME``.

The metrics they report come from :mod:`tribunal.core.metrics`, the product's.
"""
