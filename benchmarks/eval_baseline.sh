#!/usr/bin/env bash
# The embedded-SmolLM2 benchmark: methods none, rag, mia and memento on the first questions of dev,
# cold and warmed from train. One evaluation at a time (parallel runs only fight over a 2-core CPU),
# in rounds that extend every stream to the same N (3, 5, 10, 20, 50), so stopping at any point
# leaves seven comparable evaluations. Resumable: run it again and finished rows are skipped.
# Usage: bash benchmarks/eval_baseline.sh [OUT_ROOT]   (default .mia/eval-bench, not kept in git)
# Environment: ROUNDS="3 5 10 20 50", EVALS (which of the seven, default all),
# WARM_LIMIT (train questions for the warm-up, default 5),
# THREADS (torch/OpenMP threads, default: all cores), MIA_AGENT_MAX_TURNS (default 2 here).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-.mia/eval-bench}"
mkdir -p "$OUT"
# The default 8 Executor turns per plan do not fit a 2-core CPU; 2 keep every stage of the loop.
export MIA_AGENT_MAX_TURNS="${MIA_AGENT_MAX_TURNS:-2}"
export MIA_SEARCH_HYBRID="${MIA_SEARCH_HYBRID:-false}"
# The SmolLM2 baseline: every role on the embedded (transformers) model, not the llama.cpp default.
export MIA_PLANNER_BACKEND=embedded MIA_EXECUTOR_BACKEND=embedded MIA_MANAGER_BACKEND=embedded MIA_JUDGE_BACKEND=embedded
export OMP_WAIT_POLICY=PASSIVE
if [ -n "${THREADS:-}" ]; then export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"; fi
WARM_LIMIT="${WARM_LIMIT:-5}"
ROUNDS="${ROUNDS:-3 5 10 20 50}"
DEV=data/hotpotqa/dev.jsonl
TRAIN=data/hotpotqa/train.jsonl

EVALS="${EVALS:-none-cold rag-cold mia-cold rag-warm mia-warm memento-cold memento-warm}"

evaluate() {  # evaluate NAME METHOD N [extra options]
  local name=$1 method=$2 n=$3; shift 3
  case " $EVALS " in *" $name "*) ;; *) return 0 ;; esac
  echo "$(date -u +%FT%TZ) $name -> $n" >> "$OUT/progress.log"
  .venv/bin/python -m backend.eval --data "$DEV" --method "$method" --limit "$n" --out "$OUT/$name" \
    --no-progress "$@" >> "$OUT/$name.log" 2>&1 || echo "$(date -u +%FT%TZ) $name failed, see $OUT/$name.log" >> "$OUT/progress.log"
}

for n in $ROUNDS; do
  evaluate none-cold none "$n"
  evaluate rag-cold rag "$n"
  evaluate mia-cold mia "$n"
  evaluate rag-warm rag "$n" --warm-from "$TRAIN" --warm-limit "$WARM_LIMIT"
  evaluate mia-warm mia "$n" --warm-from "$TRAIN" --warm-limit "$WARM_LIMIT"
  evaluate memento-cold memento "$n"
  evaluate memento-warm memento "$n" --warm-from "$TRAIN" --warm-limit "$WARM_LIMIT"
  folders=()
  for name in none-cold rag-cold mia-cold rag-warm mia-warm memento-cold memento-warm; do
    [ -f "$OUT/$name/eval.json" ] && folders+=("$OUT/$name")
  done
  .venv/bin/python -m backend.eval --compare "${folders[@]}" --limit "$n" --out "$OUT" >> "$OUT/progress.log" 2>&1
  echo "$(date -u +%FT%TZ) round $n done" >> "$OUT/progress.log"
done
