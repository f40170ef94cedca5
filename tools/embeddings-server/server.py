"""An OpenAI-compatible embeddings endpoint serving all-mpnet-base-v2 on this machine.

POST /v1/embeddings  {"model": "all-mpnet-base-v2", "input": "text" | ["text", ...],
                      "encoding_format": "float" (default) | "base64"}
  -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}],
      "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}
GET  /v1/models      the one model served
GET  /healthz        200 once the model is loaded

Vectors are the sentence-transformers ones (mean pooling, L2-normalised, 768 floats), computed
by mpnet.py from the model directory that fetch_model.py builds. Token arrays as input are
refused (400): the harness sends text. No API key is checked; it binds to loopback by default.

Usage: python server.py MODEL_DIR [--host 127.0.0.1] [--port 8765] [--quiet]
"""

from __future__ import annotations

import argparse
import base64
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from mpnet import MPNetEmbedder

MODEL_NAMES = ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2")
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_INPUTS = 2048  # OpenAI's own limit per request


class RequestError(Exception):
    def __init__(self, status: HTTPStatus, message: str, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def parse_request(body: bytes) -> tuple[str, list[str], str]:
    """(model, texts, encoding_format) of an embeddings request, or a RequestError."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise RequestError(HTTPStatus.BAD_REQUEST, f"body is not JSON: {error}") from None
    if not isinstance(request, dict):
        raise RequestError(HTTPStatus.BAD_REQUEST, "body is not a JSON object")
    model = request.get("model")
    if model not in MODEL_NAMES:
        raise RequestError(
            HTTPStatus.NOT_FOUND, f"model {model!r} is not served; use one of {list(MODEL_NAMES)}", "model_not_found"
        )
    texts = request.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise RequestError(HTTPStatus.BAD_REQUEST, "`input` must be a string or a non-empty array of strings")
    if len(texts) > MAX_INPUTS:
        raise RequestError(HTTPStatus.BAD_REQUEST, f"`input` has {len(texts)} texts; at most {MAX_INPUTS}")
    encoding = request.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise RequestError(HTTPStatus.BAD_REQUEST, f"`encoding_format` {encoding!r}: use 'float' or 'base64'")
    if request.get("dimensions") not in (None, 768):
        raise RequestError(HTTPStatus.BAD_REQUEST, "`dimensions`: this model gives 768 only")
    return model, texts, encoding


def encode_vector(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    # float32 -> Python float is exact, and json writes the shortest text that reads back to it.
    return [float(value) for value in vector]


def make_handler(embedder: MPNetEmbedder, lock: threading.Lock, quiet: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:
            if not quiet:
                super().log_message(format, *args)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._send(HTTPStatus.OK, {"status": "ok"})
            elif self.path == "/v1/models":
                models = [{"id": name, "object": "model", "owned_by": "local"} for name in MODEL_NAMES]
                self._send(HTTPStatus.OK, {"object": "list", "data": models})
            else:
                self._send_error(RequestError(HTTPStatus.NOT_FOUND, f"no route GET {self.path}", "not_found"))

        def do_POST(self) -> None:
            if self.path not in ("/v1/embeddings", "/embeddings"):
                self._send_error(RequestError(HTTPStatus.NOT_FOUND, f"no route POST {self.path}", "not_found"))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    raise RequestError(
                        HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body of {length} bytes; at most {MAX_BODY_BYTES}"
                    )
                model, texts, encoding = parse_request(self.rfile.read(length))
                # One request at a time: the encoder already uses the cores (BLAS threads).
                with lock:
                    vectors = embedder.embed(texts)
                    tokens = sum(embedder.token_count(text) for text in texts)
            except RequestError as error:
                self._send_error(error)
                return
            data = [
                {"object": "embedding", "index": index, "embedding": encode_vector(vector, encoding)}
                for index, vector in enumerate(vectors)
            ]
            self._send(
                HTTPStatus.OK,
                {
                    "object": "list",
                    "data": data,
                    "model": model,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def _send_error(self, error: RequestError) -> None:
            self._send(error.status, {"error": {"message": error.message, "type": error.code, "code": error.code}})

        def _send(self, status: HTTPStatus, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0: any free port (printed)")
    parser.add_argument("--quiet", action="store_true", help="no line per request on stderr")
    args = parser.parse_args()
    embedder = MPNetEmbedder(args.model_dir)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(embedder, threading.Lock(), args.quiet))
    print(f"serving all-mpnet-base-v2 from {args.model_dir} at http://{args.host}:{server.server_port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
