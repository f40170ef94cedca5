#!/usr/bin/env python3
"""Replaying OpenAI-compatible chat server for the SWE-PRBench golden cases (stdlib only).

Serves POST <base>/chat/completions from inputs/replay.json:
- a request whose "model" is replay["agent_model"] is an agent call; its (task, config)
  is the record whose context_marker line occurs in the user message;
- a request whose "model" is replay["judge_model"] is a judge call; its record is the one
  whose "comment_id: <comment_id_prefix>" occurs in the user message, else (an agent
  that produced no comments) the record of the most recent agent call.
Each record's "agent" and "judge" lists are served in call order. An answer is either a
string (the assistant message content) or {"http_status": N, "error": "..."} (an HTTP
error response). A call with no answer left is answered 400 and logged as an error.

Every call is appended to --log (JSON lines) with hashes of the messages, so a run can
be compared call by call. On SIGTERM/SIGINT the server writes --summary: per record how
many answers were served and whether each list was used up exactly.

Usage: replay_server.py --replay replay.json --port-file PORTFILE --log calls.jsonl --summary summary.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def diff_section(user: str) -> str | None:
    """The diff the judge was shown: between the first '```diff\\n' and the next '\\n```'."""
    start = user.find("```diff\n")
    if start < 0:
        return None
    start += len("```diff\n")
    end = user.find("\n```", start)
    return user[start:end] if end >= 0 else None


class Replay:
    def __init__(self, path: Path, log_path: Path) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != "swe-prbench-golden-replay/1":
            raise ValueError(f"{path}: unknown format {data.get('format')!r}")
        self.agent_model = data["agent_model"]
        self.judge_model = data["judge_model"]
        self.records = data["records"]
        self.served = {i: {"agent": 0, "judge": 0} for i in range(len(self.records))}
        self.errors: list[str] = []
        self.last_agent_record: int | None = None
        self.seq = 0
        self.lock = threading.Lock()
        self.log = open(log_path, "w", encoding="utf-8")

    def find_agent_record(self, user: str) -> int | None:
        hits = [i for i, r in enumerate(self.records) if (r["context_marker"] + "\n") in user]
        return hits[0] if len(hits) == 1 else None

    def find_judge_record(self, user: str) -> int | None:
        hits = [i for i, r in enumerate(self.records) if f"comment_id: {r['comment_id_prefix']}" in user]
        if len(hits) == 1:
            return hits[0]
        if not hits and "comment_id: " not in user.split("## AI Agent Review Comments", 1)[-1]:
            return self.last_agent_record
        return None

    def answer(self, payload: dict) -> tuple[int, dict]:
        model = payload.get("model")
        messages = payload.get("messages") or []
        system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
        user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        with self.lock:
            self.seq += 1
            entry: dict = {
                "seq": self.seq,
                "model": model,
                "max_tokens": payload.get("max_tokens", payload.get("max_completion_tokens")),
                "temperature": payload.get("temperature"),
                "system_sha256": sha256(system),
                "system_chars": len(system),
                "user_sha256": sha256(user),
                "user_chars": len(user),
            }
            if model == self.agent_model:
                kind, idx = "agent", self.find_agent_record(user)
            elif model == self.judge_model:
                kind, idx = "judge", self.find_judge_record(user)
                entry["judge_diff_sha256"] = sha256(diff_section(user) or "")
                entry["judge_diff_chars"] = len(diff_section(user) or "")
            else:
                kind, idx = "unknown", None
            entry["kind"] = kind
            if idx is None:
                msg = f"call {self.seq}: no record for a {kind} request (model {model!r})"
                self.errors.append(msg)
                entry["error"] = msg
                self._write(entry)
                return 400, {"error": {"message": msg}}
            rec = self.records[idx]
            entry["task_id"], entry["config"] = rec["task_id"], rec["config"]
            n = self.served[idx][kind]
            answers = rec[kind]
            if kind == "agent":
                self.last_agent_record = idx
                marker_end = user.find(rec["context_marker"])
                entry["user_prefix_chars"] = marker_end
            entry["answer_index"] = n
            if n >= len(answers):
                msg = f"call {self.seq}: {rec['task_id']}/{rec['config']} has no {kind} answer #{n}"
                self.errors.append(msg)
                entry["error"] = msg
                self._write(entry)
                return 400, {"error": {"message": msg}}
            self.served[idx][kind] = n + 1
            ans = answers[n]
            self._write(entry)
        if isinstance(ans, dict):
            return int(ans["http_status"]), {"error": {"message": ans.get("error", "")}}
        return 200, {
            "id": f"golden-{entry['seq']}",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ans}}],
        }

    def _write(self, entry: dict) -> None:
        self.log.write(json.dumps(entry, sort_keys=True) + "\n")
        self.log.flush()

    def summary(self) -> dict:
        out = []
        exact = True
        for i, rec in enumerate(self.records):
            row = {"task_id": rec["task_id"], "config": rec["config"]}
            for kind in ("agent", "judge"):
                row[f"{kind}_served"] = self.served[i][kind]
                row[f"{kind}_recorded"] = len(rec[kind])
                if self.served[i][kind] != len(rec[kind]):
                    exact = False
            out.append(row)
        return {"all_answers_used_exactly": exact and not self.errors, "errors": self.errors, "records": out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True, type=Path)
    ap.add_argument("--port-file", required=True, type=Path)
    ap.add_argument("--log", required=True, type=Path)
    ap.add_argument("--summary", required=True, type=Path)
    args = ap.parse_args()
    replay = Replay(args.replay, args.log)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                payload = json.loads(self.rfile.read(length).decode("utf-8"))
            except ValueError as e:
                status, body = 400, {"error": {"message": f"request body is not JSON: {e}"}}
            else:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    status, body = 404, {"error": {"message": f"unknown path {self.path}"}}
                else:
                    status, body = replay.answer(payload)
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *a) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    def stop(_signum, _frame) -> None:
        args.summary.write_text(json.dumps(replay.summary(), indent=2) + "\n", encoding="utf-8")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    args.port_file.write_text(str(server.server_address[1]), encoding="utf-8")
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
