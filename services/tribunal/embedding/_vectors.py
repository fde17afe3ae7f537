"""The array every embedder returns: one float32 row of unit length per text."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Vectors"]

Vectors = NDArray[np.float32]
