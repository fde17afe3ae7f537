"""A sentence-transformers model's forward pass as one TorchScript call.

Run eagerly, a forward pass is a few hundred small torch calls from Python, and each
takes Python's GIL back when it returns: in a service whose other threads hold the GIL
(gRPC, retrieval, the gateway's checks) the pass stalls between calls. Traced, the
transformer runs as one call that does not hold the GIL; tokenisation, pooling and
normalisation stay as sentence-transformers does them.

Only models made of a transformer, mean or CLS pooling and normalisation are traced
(every embedder the profiles ship). :func:`trace_encoder` checks the trace against the
model's own ``encode`` on texts of several lengths before it is used, and returns None
(the caller keeps ``encode``) for any other model or any difference.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from ._vectors import Vectors

__all__ = ["trace_encoder"]

log = logging.getLogger(__name__)

_POOLING = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token"}
_TOLERANCE = 1e-4
"""Largest difference to ``encode`` accepted on the probe texts (float rounding is ~1e-6)."""
_PROBES = (
    "hi",
    "How does the virus spread between people?",
    "Wash your hands often with soap and water for at least 20 seconds, especially "
    "after you have been in a public place, or after blowing your nose or coughing.",
    " ".join(["a long passage that runs past the model's length limit"] * 60),
)

Encoder = Callable[[Sequence[str]], "Vectors"]


def _pooling_mode(model: SentenceTransformer) -> str | None:
    """ "mean" or "cls" for a [Transformer, Pooling, Normalize] model; None otherwise."""
    kinds = [type(module).__name__ for module in model]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        return None
    pooling: Any = model[1]
    config = pooling.get_config_dict()
    modes = [mode for mode, key in _POOLING.items() if config.get(key)]
    if not modes and config.get("pooling_mode") in _POOLING:  # newer configs name it once
        modes = [config["pooling_mode"]]
    others = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
    if len(modes) != 1 or any(k not in _POOLING.values() for k in others):
        return None
    return modes[0]


def trace_encoder(
    model: SentenceTransformer, tokenizing: threading.Lock | None = None
) -> Encoder | None:
    """A function embedding texts (one pass, normalised vectors) with ``model``'s
    transformer traced; None when the model cannot be traced or the trace differs.
    ``tokenizing``: held while the tokenizer runs (it is not safe to call from two
    threads at once); the traced pass itself runs unlocked."""
    import torch

    pooling = _pooling_mode(model)
    if pooling is None:
        return None
    transformer: Any = model[0]
    network = getattr(transformer, "auto_model", None) or getattr(transformer, "model", None)
    if network is None:
        return None

    class _Forward(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.inner(input_ids=ids, attention_mask=mask, return_dict=False)[0]

    device = model.device
    # What encode tokenises with (``tokenize`` in sentence-transformers before 5.2).
    prepare: Callable[[list[str]], Any] = getattr(model, "preprocess", None) or model.tokenize
    example = prepare(list(_PROBES[:2]))
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python
            traced = torch.jit.trace(  # type: ignore[no-untyped-call]
                _Forward(network).eval(),
                (example["input_ids"].to(device), example["attention_mask"].to(device)),
                check_trace=False,
            )
    except Exception as exc:  # an architecture the tracer cannot follow: keep encode
        log.warning("embedder not traced", extra={"why": repr(exc)})
        return None

    guard = tokenizing or threading.Lock()

    def encode(texts: Sequence[str]) -> Vectors:
        with guard:
            features = prepare(list(texts))
        ids = features["input_ids"].to(device)
        mask = features["attention_mask"].to(device)
        with torch.inference_mode():
            hidden = traced(ids, mask)
            if pooling == "cls":
                pooled = hidden[:, 0]
            else:
                weights = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            vectors = torch.nn.functional.normalize(pooled, p=2, dim=1)
        out: Vectors = vectors.float().cpu().numpy()
        return out

    probes = list(_PROBES)
    expected = model.encode(probes, normalize_embeddings=True, convert_to_numpy=True)
    difference = float(np.abs(encode(probes) - expected).max())
    if not difference <= _TOLERANCE:
        log.warning("embedder trace differs from encode; not used", extra={"max": difference})
        return None
    return encode
