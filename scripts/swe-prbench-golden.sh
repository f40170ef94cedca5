#!/usr/bin/env bash
# Runs the unmodified SWE-PRBench reference harness on the golden inputs under
# tests/golden/swe-prbench/inputs and writes its outputs to tests/golden/swe-prbench/outputs.
#
#   scripts/swe-prbench-golden.sh HARNESS_DIR [OUT_DIR]
#
# HARNESS_DIR is a work tree of github.com/FoundryHQ-AI/swe-prbench (the folder holding
# eval_harness/). Model calls go to tools/replay_server.py through the harness's own model
# config (provider openai_compatible, base_url); the embedding model is replaced by the
# stub package tools/st_stub/sentence_transformers placed first on PYTHONPATH. Two runs:
#   embeddings — stub vectors (inputs/vectors.json), prs.jsonl, contexts root, --configs A config_B config_C_full_context
#   lexical    — no sentence_transformers at all (Jaccard fallback), prs.json, contexts/config_A, configs from the model config
# The Python environment is a venv at $SWE_PRBENCH_VENV (default /tmp/swe-prbench-golden-venv),
# created with tools/requirements-golden.txt when missing.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 HARNESS_DIR [OUT_DIR]" >&2
  exit 2
fi
HARNESS_DIR=$(cd "$1" && pwd)
KIT=$(cd "$(dirname "$0")/../tests/golden/swe-prbench" && pwd)
OUT_DIR=${2:-$KIT/outputs}
VENV=${SWE_PRBENCH_VENV:-/tmp/swe-prbench-golden-venv}
PY=${SWE_PRBENCH_PYTHON:-python3}

if [[ ! -f "$HARNESS_DIR/eval_harness/run_eval.py" ]]; then
  echo "$HARNESS_DIR: no eval_harness/run_eval.py here; pass the harness work tree" >&2
  exit 2
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r "$KIT/tools/requirements-golden.txt"
fi

WORK=$(mktemp -d /tmp/swe-prbench-golden.XXXXXX)
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill "$SERVER_PID"; fi
}
trap cleanup EXIT

run_mode() {
  local mode=$1
  local dir="$WORK/$mode"
  mkdir -p "$dir"
  "$VENV/bin/python" "$KIT/tools/replay_server.py" --replay "$KIT/inputs/replay.json" \
    --port-file "$dir/port" --log "$dir/calls.jsonl" --summary "$dir/replay-summary.json" &
  SERVER_PID=$!
  for _ in $(seq 100); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
  if [[ ! -s "$dir/port" ]]; then echo "$mode: replay server did not start" >&2; exit 1; fi
  local port
  port=$(cat "$dir/port")
  cat >"$dir/models.yaml" <<EOF
defaults:
  judge_model: golden_judge
  configs: [A, B, C]
providers:
  openai_compatible:
    api_key: golden-replay-no-secret
    base_url: http://127.0.0.1:$port/v1
models:
  golden_agent:
    provider: openai_compatible
    model: golden-agent
judge:
  golden_judge:
    provider: openai_compatible
    model: golden-judge
EOF
  local ds="$KIT/inputs/dataset"
  local args=(--annotations "$ds/annotations" --output "$dir/runs" --model-config "$dir/models.yaml" --model golden_agent -q)
  local pythonpath=""
  : >"$dir/misses.jsonl"
  if [[ $mode == embeddings ]]; then
    args+=(--contexts "$ds/contexts" --prs "$ds/prs.jsonl" --configs A config_B config_C_full_context)
    pythonpath="$KIT/tools/st_stub"
  else
    args+=(--contexts "$ds/contexts/config_A" --prs "$ds/prs.json")
  fi
  (cd "$HARNESS_DIR" && env -u PYTHONPATH PYTHONPATH="$pythonpath" PYTHONHASHSEED=0 \
    SWE_PRBENCH_GOLDEN_VECTORS="$KIT/inputs/vectors.json" SWE_PRBENCH_GOLDEN_MISSES="$dir/misses.jsonl" \
    "$VENV/bin/python" eval_harness/run_eval.py "${args[@]}") >"$dir/harness.log" 2>&1 || {
      echo "$mode: harness failed, log: $dir/harness.log" >&2; tail -20 "$dir/harness.log" >&2; exit 1; }
  kill "$SERVER_PID"
  wait "$SERVER_PID" || true
  SERVER_PID=""

  if [[ -s "$dir/misses.jsonl" ]]; then
    echo "$mode: the embedding stub was asked for texts without vectors:" >&2; cat "$dir/misses.jsonl" >&2; exit 1
  fi
  if ! "$VENV/bin/python" -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["all_answers_used_exactly"] else 1)' \
      "$dir/replay-summary.json"; then
    echo "$mode: recorded answers were not used exactly; see $dir/replay-summary.json" >&2; exit 1
  fi
  local run="$dir/runs/golden_agent__judge_golden_judge"
  rm -rf "${OUT_DIR:?}/$mode"
  mkdir -p "$OUT_DIR/$mode"
  cp -r "$run/." "$OUT_DIR/$mode/"
  cp "$dir/calls.jsonl" "$dir/replay-summary.json" "$OUT_DIR/$mode/"
  echo "$mode: $(ls "$OUT_DIR/$mode/eval_results" | wc -l) eval records -> $OUT_DIR/$mode"
}

run_mode embeddings
run_mode lexical
echo "work files: $WORK"
