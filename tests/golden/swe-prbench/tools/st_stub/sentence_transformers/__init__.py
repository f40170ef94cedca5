"""Stand-in for the `sentence_transformers` package used by the SWE-PRBench golden runs.

The harness loads SentenceTransformer("all-mpnet-base-v2"); this module answers encode()
with fixed vectors read from the JSON file named by SWE_PRBENCH_GOLDEN_VECTORS
({"dim": N, "vectors": {text: [floats]}}), as float64 numpy arrays. A text without a
vector is an error in the golden inputs: it is appended to SWE_PRBENCH_GOLDEN_MISSES
(if set) and raised as KeyError (the harness would then silently fall back to Jaccard,
so the golden script fails the run when the misses file is not empty).
"""
from __future__ import annotations

import json
import os

import numpy as np

from . import util  # noqa: F401  (the harness does `from sentence_transformers import util`)

EXPECTED_MODEL = "all-mpnet-base-v2"
_VECTORS: dict[str, np.ndarray] | None = None


def _vectors() -> dict[str, np.ndarray]:
    global _VECTORS
    if _VECTORS is None:
        path = os.environ["SWE_PRBENCH_GOLDEN_VECTORS"]
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        _VECTORS = {text: np.asarray(vec, dtype=np.float64) for text, vec in data["vectors"].items()}
    return _VECTORS


class SentenceTransformer:
    def __init__(self, model_name_or_path: str, *args, **kwargs) -> None:
        if model_name_or_path != EXPECTED_MODEL:
            raise ValueError(f"golden stub serves {EXPECTED_MODEL!r} only, asked for {model_name_or_path!r}")
        self.model_name = model_name_or_path

    def encode(self, sentences, convert_to_tensor: bool = False, **kwargs):
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        table = _vectors()
        rows = []
        for text in texts:
            vec = table.get(text)
            if vec is None:
                misses = os.environ.get("SWE_PRBENCH_GOLDEN_MISSES")
                if misses:
                    with open(misses, "a", encoding="utf-8") as fh:
                        fh.write(json.dumps(text) + "\n")
                raise KeyError(f"golden stub has no vector for {text!r}")
            rows.append(vec)
        out = np.vstack(rows) if rows else np.zeros((0, 0))
        return out[0] if single else out
