#!/usr/bin/env bash
# agent.reader_example, measured on train: the loop answers train questions N+1..N+WARM first (with their
# ground truth: the memory the examples come from), then the first N train questions twice, each time from
# a copy of that memory, with the reader's example off and on; the comparison pairs the two.
# Resumable: run it again and finished rows are skipped. One evaluation at a time.
# Usage: bash benchmarks/reader_example.sh [OUT]   (default .mia/reader-example, not kept in git)
# Environment: N (default 40), WARM (default 60), ACCEPT_CODE_CHANGE=1 to resume under other code.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-.mia/reader-example}"
N="${N:-40}"
WARM="${WARM:-60}"
DATA=data/hotpotqa/train.jsonl
mkdir -p "$OUT"
export OMP_WAIT_POLICY=PASSIVE
source benchmarks/common.sh
sample_load "$OUT/load.log"

evaluate() {  # evaluate NAME ARGS...
  local name=$1; shift
  echo "$(date -u +%FT%TZ) $name" >> "$OUT/progress.log"
  .venv/bin/python -m backend.eval --method mia --data "$DATA" --no-progress --out "$OUT/$name" --label "$name" \
      ${ACCEPT_CODE_CHANGE:+--accept-code-change} "$@" >> "$OUT/$name.log" 2>&1 \
    || { echo "$(date -u +%FT%TZ) $name failed, see $OUT/$name.log" >> "$OUT/progress.log"; exit 1; }
}

evaluate warm --skip "$N" --limit "$WARM"
for shown in false true; do
  MIA_AGENT_READER_EXAMPLE=$shown evaluate "example-$shown" --limit "$N" --memory-from "$OUT/warm"
done
.venv/bin/python -m backend.eval --compare "$OUT/example-false" "$OUT/example-true" --out "$OUT/compare-$N" \
    >> "$OUT/progress.log" 2>&1
echo "$(date -u +%FT%TZ) done: $OUT/compare-$N" >> "$OUT/progress.log"
