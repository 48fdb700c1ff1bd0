#!/usr/bin/env bash
# Settings that use memory, measured on train from one warmed memory: the loop answers train questions
# N+1..N+WARM first (with their ground truth: the memory the variants draw on), then the first N train
# questions once per variant, each from its own copy of that memory; the comparison pairs each with `base`.
#   base       the defaults
#   example    agent.reader_example: the final read shown a similar question answered right
#   plans4     agent.plan_candidates = 4: four plans written, the one most like past successful plans followed
# Resumable: run it again and finished rows are skipped. One evaluation at a time.
# Usage: bash benchmarks/warm_variants.sh [OUT]   (default .mia/warm-variants, not kept in git)
# Environment: N (default 40), WARM (default 60), VARIANTS (default "base example plans4"),
#   ACCEPT_CODE_CHANGE=1 to resume under other code.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-.mia/warm-variants}"
N="${N:-40}"
WARM="${WARM:-60}"
VARIANTS="${VARIANTS:-base example plans4}"
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
folders=()
for variant in $VARIANTS; do
  case $variant in
    base) evaluate base --limit "$N" --memory-from "$OUT/warm" ;;
    example) MIA_AGENT_READER_EXAMPLE=true evaluate example --limit "$N" --memory-from "$OUT/warm" ;;
    plans4) MIA_AGENT_PLAN_CANDIDATES=4 evaluate plans4 --limit "$N" --memory-from "$OUT/warm" ;;
    *) echo "unknown variant $variant (base, example, plans4)" >&2; exit 2 ;;
  esac
  folders+=("$OUT/$variant")
done
.venv/bin/python -m backend.eval --compare "${folders[@]}" --out "$OUT/compare-$N" >> "$OUT/progress.log" 2>&1
echo "$(date -u +%FT%TZ) done: $OUT/compare-$N" >> "$OUT/progress.log"
