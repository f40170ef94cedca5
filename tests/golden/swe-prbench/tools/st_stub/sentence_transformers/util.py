"""cos_sim as sentence_transformers.util computes it: rows normalised, then a @ b.T (float64 here)."""
from __future__ import annotations

import numpy as np


def _rows(x) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    return arr.reshape(1, -1) if arr.ndim == 1 else arr


def _normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def cos_sim(a, b) -> np.ndarray:
    return _normalize(_rows(a)) @ _normalize(_rows(b)).T
