#!/usr/bin/env bash
# The image benchmark (benchmarks/image_questions.py): questions whose first hop is a scanned page in
# the image (that article hidden from search), and flags of the image index. On the default model:
#   image-METHOD  image.jsonl with its images, answered by METHOD (default mia);
#   text-none     the page questions as plain text, nothing hidden, the Executor alone (the baseline);
#   text-METHOD   the same with METHOD (the latency reference);
#   notices-METHOD  printed notices of invented facts, each asked what it states (notices.jsonl).
# Then the OCR character error rate (cer.md) and the tables (table-*.md, notices-table.md). One
# evaluation at a time, each resumable: run the script again and finished rows are skipped. The machine's load is sampled into
# load.log every minute while it runs.
# Usage: bash benchmarks/image_bench.sh [OUT_ROOT]   (default .mia/image-bench, not kept in git)
# Environment: SPLIT (train | dev, default dev), N (questions in all, default 100), NOTICES (notices,
#   default 20), METHOD (default mia),
#   VARIANT (a name for the image run's folder, image-METHOD-VARIANT, with its MIA_* settings, e.g.
#   VARIANT=text-first MIA_AGENT_IMAGE_TEXT_FIRST=true), ACCEPT_CODE_CHANGE=1 to resume a stage that
#   other code started (eval.json records it).
set -uo pipefail
cd "$(dirname "$0")/.."
SPLIT="${SPLIT:-dev}"
N="${N:-100}"
NOTICES="${NOTICES:-20}"
METHOD="${METHOD:-mia}"
OUT="${1:-.mia/image-bench}/$SPLIT-$N"
mkdir -p "$OUT"
export OMP_WAIT_POLICY=PASSIVE
source benchmarks/common.sh
sample_load "$OUT/load.log"

note() { echo "$(date -u +%FT%TZ) $*" >> "$OUT/progress.log"; }

evaluate() {  # evaluate NAME [options]
  local name=$1; shift
  note "$name"
  .venv/bin/python -m backend.eval --no-progress --out "$OUT/$name" ${ACCEPT_CODE_CHANGE:+--accept-code-change} "$@" \
      >> "$OUT/$name.log" 2>&1 \
    || { note "$name failed, see $OUT/$name.log"; exit 1; }
}

if [ ! -f "$OUT/set.json" ]; then
  .venv/bin/python benchmarks/image_questions.py build --split "$SPLIT" --n "$N" --out "$OUT" >> "$OUT/progress.log" 2>&1 \
    || { note "build failed, see $OUT/progress.log"; exit 1; }
fi
if [ ! -f "$OUT/notices.jsonl" ]; then
  .venv/bin/python benchmarks/image_questions.py notices --split "$SPLIT" --n "$NOTICES" --out "$OUT" >> "$OUT/progress.log" 2>&1 \
    || { note "notices failed, see $OUT/progress.log"; exit 1; }
fi
.venv/bin/python benchmarks/image_questions.py cer "$OUT" > "$OUT/cer.md"
IMAGE_RUN="image-$METHOD${VARIANT:+-$VARIANT}"
NOTICES_RUN="notices-$METHOD${VARIANT:+-$VARIANT}"
evaluate "$IMAGE_RUN" --method "$METHOD" --data "$OUT/image.jsonl"
evaluate "$NOTICES_RUN" --method "$METHOD" --data "$OUT/notices.jsonl"
notices_runs=()
for run in "$OUT"/notices-*/; do [ -f "$run/eval.json" ] && notices_runs+=(--eval "${run%/}"); done
.venv/bin/python benchmarks/image_questions.py notices-table "$OUT" "${notices_runs[@]}" > "$OUT/notices-table.md"
evaluate text-none --method none --data "$OUT/text.jsonl"
evaluate "text-$METHOD" --method "$METHOD" --data "$OUT/text.jsonl"
.venv/bin/python benchmarks/image_questions.py table "$OUT" --image "$OUT/$IMAGE_RUN" \
    --text "$OUT/text-none" --text "$OUT/text-$METHOD" > "$OUT/table-$IMAGE_RUN.md"
note "done: $OUT/cer.md, $OUT/table-$IMAGE_RUN.md, $OUT/notices-table.md"
