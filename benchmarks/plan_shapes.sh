#!/usr/bin/env bash
# What a plan should be, on the default model: numbered steps against sub-questions researched hop by
# hop (agent.plan_shape), with the Executor alone (`none`) as the baseline and `plan` (the Planner
# without memory) beside `mia`. For tuning, on train by default; dev is for the final table.
#   none          the Executor alone
#   steps-mia     the loop with a plan of steps (today's default)
#   subq-mia      the loop with a plan of sub-questions
#   subq-plan     sub-questions without memory
# In rounds that extend every stream to the same N, so that stopping anywhere leaves comparable
# evaluations; each round ends with the paired comparison and the loss table (per hop for sub-questions).
# Resumable: run it again and finished rows are skipped. One evaluation at a time.
# Usage: bash benchmarks/plan_shapes.sh [OUT_ROOT]   (default .mia/plan-shapes, not kept in git)
# Environment: SPLIT (train | dev, default train), ROUNDS (default "10 20 40 60"), EVALS (which, default
#   all four), MIA_SEARCH_HYBRID=false for BM25 alone, ACCEPT_CODE_CHANGE=1 to resume under other code.
set -uo pipefail
cd "$(dirname "$0")/.."
SPLIT="${SPLIT:-train}"
ROUNDS="${ROUNDS:-10 20 40 60}"
EVALS="${EVALS:-none steps-mia subq-mia subq-plan}"
SEARCH=$([ "${MIA_SEARCH_HYBRID:-true}" = false ] && echo bm25 || echo hybrid)
OUT="${1:-.mia/plan-shapes}/$SPLIT-$SEARCH"
DATA="data/hotpotqa/$SPLIT.jsonl"
mkdir -p "$OUT"
export OMP_WAIT_POLICY=PASSIVE
source benchmarks/common.sh
sample_load "$OUT/load.log"

evaluate() {  # evaluate NAME SHAPE METHOD N
  local name=$1 shape=$2 method=$3 n=$4
  case " $EVALS " in *" $name "*) ;; *) return 0 ;; esac
  echo "$(date -u +%FT%TZ) $name -> $n" >> "$OUT/progress.log"
  MIA_AGENT_PLAN_SHAPE="$shape" .venv/bin/python -m backend.eval --data "$DATA" --method "$method" --limit "$n" \
      --out "$OUT/$name" --label "$name" --no-progress ${ACCEPT_CODE_CHANGE:+--accept-code-change} \
      >> "$OUT/$name.log" 2>&1 \
    || { echo "$(date -u +%FT%TZ) $name failed, see $OUT/$name.log" >> "$OUT/progress.log"; exit 1; }
}

for n in $ROUNDS; do
  evaluate none steps none "$n"
  evaluate steps-mia steps mia "$n"
  evaluate subq-mia subquestions mia "$n"
  evaluate subq-plan subquestions plan "$n"
  folders=()
  for name in $EVALS; do [ -f "$OUT/$name/eval.json" ] && folders+=("$OUT/$name"); done
  .venv/bin/python -m backend.eval --compare "${folders[@]}" --limit "$n" --out "$OUT/compare-$n" >> "$OUT/progress.log" 2>&1
  echo "$(date -u +%FT%TZ) round $n done: $OUT/compare-$n" >> "$OUT/progress.log"
done
