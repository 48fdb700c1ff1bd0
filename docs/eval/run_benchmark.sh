#!/usr/bin/env bash
# The embedded-SmolLM2 benchmark: methods none, rag and mia on the first questions of dev, cold and
# warmed from train, the five evaluations side by side (one process each). Resumable: run it again
# and finished rows are skipped; each round extends the stream (N = 3, 5, 10, 20, 50).
# Usage: bash docs/eval/run_benchmark.sh [OUT_ROOT]   (default .mia/eval-bench)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-.mia/eval-bench}"
mkdir -p "$OUT"
# The default 8 Executor turns per plan do not fit a shared 2-core CPU; 2 keep every stage of the loop.
export MIA_AGENT_MAX_TURNS="${MIA_AGENT_MAX_TURNS:-2}"
WARM_LIMIT="${WARM_LIMIT:-2}"
DEV=data/hotpotqa/dev.jsonl
TRAIN=data/hotpotqa/train.jsonl

stream() {  # stream NAME METHOD [extra options]: extend one evaluation round by round
  local name=$1 method=$2; shift 2
  for n in 3 5 10 20 50; do
    .venv/bin/python -m backend.eval --data "$DEV" --method "$method" --limit "$n" --out "$OUT/$name" \
      --no-progress "$@" || return
  done
}

stream none-cold none > "$OUT/none-cold.log" 2>&1 &
stream rag-cold rag > "$OUT/rag-cold.log" 2>&1 &
stream mia-cold mia > "$OUT/mia-cold.log" 2>&1 &
stream rag-warm rag --warm-from "$TRAIN" --warm-limit "$WARM_LIMIT" > "$OUT/rag-warm.log" 2>&1 &
stream mia-warm mia --warm-from "$TRAIN" --warm-limit "$WARM_LIMIT" > "$OUT/mia-warm.log" 2>&1 &
wait
