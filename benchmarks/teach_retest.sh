#!/usr/bin/env bash
# Teach-and-retest: what a person teaches changes the next answer. On the default model (mia):
#   taught    N questions asked cold, each answer then corrected with the ground truth typed as the
#             right answer, through the app's feedback path (--teach);
#   same      the same N questions again, from the taught memory;
#   reworded  a hand-written rewording of each (benchmarks/rewordings/SPLIT.jsonl), from it;
#   next      the next N questions, never taught, from it ("transfer") ...
#   next-cold ... and the same questions cold, the pair for next.
# One evaluation at a time, each resumable (run the script again and finished rows are skipped);
# the tables come from `python -m backend.eval --compare` (paired, exact McNemar, bootstrap interval).
# Usage: bash benchmarks/teach_retest.sh [OUT_ROOT]   (default .mia/teach-retest, not kept in git)
# Environment: SPLIT (train | dev, default dev), N (default 100; train has 60 rewordings),
#   ACCEPT_CODE_CHANGE=1 to resume a stage that other code started (eval.json records it).
# The machine's load is sampled every minute into OUT/load.log.
set -uo pipefail
cd "$(dirname "$0")/.."
SPLIT="${SPLIT:-dev}"
N="${N:-100}"
OUT="${1:-.mia/teach-retest}/$SPLIT-$N"
DATA="data/hotpotqa/$SPLIT.jsonl"
mkdir -p "$OUT"
export OMP_WAIT_POLICY=PASSIVE
source benchmarks/common.sh
sample_load "$OUT/load.log"

evaluate() {  # evaluate NAME [options]
  local name=$1; shift
  echo "$(date -u +%FT%TZ) $name" >> "$OUT/progress.log"
  .venv/bin/python -m backend.eval --method mia --no-progress --out "$OUT/$name" ${ACCEPT_CODE_CHANGE:+--accept-code-change} "$@" \
      >> "$OUT/$name.log" 2>&1 \
    || { echo "$(date -u +%FT%TZ) $name failed, see $OUT/$name.log" >> "$OUT/progress.log"; exit 1; }
}

evaluate taught --data "$DATA" --limit "$N" --teach
evaluate same --data "$DATA" --limit "$N" --memory-from "$OUT/taught"
evaluate reworded --data "benchmarks/rewordings/$SPLIT.jsonl" --limit "$N" --memory-from "$OUT/taught"
evaluate next-cold --data "$DATA" --skip "$N" --limit "$N"
evaluate next --data "$DATA" --skip "$N" --limit "$N" --memory-from "$OUT/taught"
.venv/bin/python -m backend.eval --compare "$OUT/taught" "$OUT/same" "$OUT/reworded" --out "$OUT/compare-taught"
.venv/bin/python -m backend.eval --compare "$OUT/next-cold" "$OUT/next" --out "$OUT/compare-next"
echo "$(date -u +%FT%TZ) done: $OUT/compare-taught, $OUT/compare-next" >> "$OUT/progress.log"
