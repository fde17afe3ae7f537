"""Tribunal's lab: evaluation runners, paper reproductions, data set builders and the
offline chart checks, with the ``tribunal-lab`` command (``pip install -e '.[lab]'``).

It measures the product (``tribunal``) and builds what the product trains on; the
product never imports it. Data sets are read from ``$TRIBUNAL_LAB_DATA`` (default
``../shared/data``), per-item caches kept in ``$TRIBUNAL_LAB_CACHE`` (default
``.build/lab-cache``).
"""

from ._io import read_jsonl
from ._paths import CACHE_ENV, DATA_ENV, cache_dir, data_root

__all__ = ["CACHE_ENV", "DATA_ENV", "cache_dir", "data_root", "read_jsonl"]
