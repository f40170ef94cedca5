"""Checks the server's vectors against sentence-transformers' own for the same model directory.

Starts server.py on a free loopback port, embeds varied texts through POST /v1/embeddings (all
in one request, and one request per text), embeds them with
`SentenceTransformer(MODEL_DIR).encode(...)` (batched, as the harness's similarity table does,
and one text per call, as its alignment does), and reports the largest absolute difference of
any vector component and of any pairwise cosine. Exits 1 when a difference exceeds the tolerance.

Usage: python check.py MODEL_DIR [--tolerance 1e-5]   (needs requirements-check.txt)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

TEXTS = [
    "hello world",
    "This function dereferences `ptr` before checking it for NULL; move the check above line 42.",
    "Possible off-by-one: the loop runs `i <= len`, so the last iteration reads past the buffer.",
    "nit: rename `tmp2` to something that says what it holds",
    "LGTM",
    "",
    "   ",
    "The lock is taken in `flush()` and again in `write()` which `flush()` calls — this deadlocks.",
    "```python\nfor k, v in d.items():\n    if v is None:\n        del d[k]\n```\nMutating a dict while iterating raises RuntimeError.",
    "@@ -10,7 +10,7 @@ fn parse(input: &str) -> Result<u32, Error> {\n-    input.parse().unwrap()\n+    input.parse().map_err(Error::from)\n }",
    'SQL injection: the query is built with f"SELECT * FROM users WHERE id = {user_id}"; use parameters.',
    "Ce commentaire est en français : la variable n'est jamais initialisée.",
    "这个函数没有处理空输入的情况。",
    "Emoji and symbols 🚀✅ — ≤ ≥ ≠ ∞ µs",
    "UPPER CASE SHOUTING ABOUT A MISSING TEST CASE",
    "Consider using `Arc<Mutex<T>>` instead of `Rc<RefCell<T>>` since this crosses threads.",
    "The retry loop has no backoff and no upper bound, so a down dependency turns into a hot loop.",
    "word " * 600,  # past max_seq_length (384 tokens): truncated
    " ".join(f"token{i}" for i in range(150)),
    "Missing error handling when the config file does not exist.\n\nAlso the default timeout of 0 means wait forever.",
    "a",
    "The migration drops the `email` column before copying its data to `contacts.email`.",
]


def start_server(model_dir: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "server.py"), model_dir, "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    line = process.stdout.readline()
    if " at http://" not in line:
        process.kill()
        raise SystemExit(f"server.py did not start: {line!r}")
    return process, line.rsplit(" at ", 1)[1].strip()


def embed_via_server(base_url: str, texts: list[str]) -> np.ndarray:
    body = json.dumps({"model": "all-mpnet-base-v2", "input": texts}).encode()
    request = urllib.request.Request(f"{base_url}/embeddings", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        answer = json.load(response)
    rows = sorted(answer["data"], key=lambda item: item["index"])
    return np.asarray([row["embedding"] for row in rows], dtype=np.float64)


def cosines(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1, norms)
    return unit @ unit.T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(args.model_dir, device="cpu")
    batched = reference.encode(TEXTS).astype(np.float64)
    one_by_one = np.stack([reference.encode([text])[0] for text in TEXTS]).astype(np.float64)

    process, base_url = start_server(args.model_dir)
    try:
        served = embed_via_server(base_url, TEXTS)
        served_one_by_one = np.stack([embed_via_server(base_url, [text])[0] for text in TEXTS])
    finally:
        process.terminate()
        process.wait(timeout=30)

    if served.shape != (len(TEXTS), 768):
        raise SystemExit(f"server answered shape {served.shape}, expected ({len(TEXTS)}, 768)")
    comparisons = {
        "server (one request) vs sentence-transformers (batched)": (served, batched),
        "server (one request per text) vs sentence-transformers (one text per call)": (served_one_by_one, one_by_one),
        "sentence-transformers batched vs one text per call (its own spread)": (batched, one_by_one),
    }
    worst = 0.0
    for label, (ours, theirs) in comparisons.items():
        component = float(np.abs(ours - theirs).max())
        cosine = float(np.abs(cosines(ours) - cosines(theirs)).max())
        print(f"{label}: max |component diff| {component:.3e}, max |cosine diff| {cosine:.3e}")
        if label.startswith("server"):
            worst = max(worst, component, cosine)
    print(f"{len(TEXTS)} texts; worst server difference {worst:.3e}; tolerance {args.tolerance:.0e}")
    if worst > args.tolerance:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
