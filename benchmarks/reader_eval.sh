#!/usr/bin/env bash
# The trained reader against the base model: the same method on the same `dev` questions, once with
# the Executor's LoRA (a finished `python -m training reader` folder) and once without, on the
# default model (llama.cpp). One evaluation at a time, in rounds that extend both to the same N
# (50, 100, 200, 300), so stopping at any point leaves a paired comparison; resumable: run it again
# and finished rows are skipped. The rows and table.json land in OUT, ready to be committed under
# results/ (python -m backend.eval --table OUT recomputes the table and its rows' sha256).
# Usage: bash benchmarks/reader_eval.sh [OUT]   (default .mia/reader-eval, not kept in git)
# Environment: ADAPTER (default .mia/reader/run), METHODS (default "none"; "none mia" adds the loop),
# ROUNDS (default "50 100 200 300"), DATA (default data/hotpotqa/dev.jsonl: final tables only).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/common.sh
OUT="${1:-.mia/reader-eval}"
ADAPTER="${ADAPTER:-.mia/reader/run}"
METHODS="${METHODS:-none}"
ROUNDS="${ROUNDS:-50 100 200 300}"
DATA="${DATA:-data/hotpotqa/dev.jsonl}"
export OMP_WAIT_POLICY=PASSIVE
if [ ! -f "$ADAPTER/manifest.json" ]; then
  echo "$ADAPTER has no manifest.json: train the reader first (make reader), or set ADAPTER to its folder." >&2
  exit 2
fi
mkdir -p "$OUT"
sample_load "$OUT/load.log"

evaluate() {  # evaluate NAME METHOD N ADAPTER_OR_EMPTY
  local name=$1 method=$2 n=$3 adapter=$4
  echo "$(date -u +%FT%TZ) $name -> $n" >> "$OUT/progress.log"
  MIA_EXECUTOR_ADAPTER="$adapter" .venv/bin/python -m backend.eval --data "$DATA" --method "$method" --limit "$n" \
    --out "$OUT/$name" --no-progress >> "$OUT/$name.log" 2>&1 \
    || echo "$(date -u +%FT%TZ) $name failed, see $OUT/$name.log" >> "$OUT/progress.log"
}

for n in $ROUNDS; do
  folders=()
  for method in $METHODS; do
    evaluate "$method-base" "$method" "$n" ""
    evaluate "$method-reader" "$method" "$n" "$ADAPTER"
    folders+=("$OUT/$method-base" "$OUT/$method-reader")
  done
  .venv/bin/python -m backend.eval --compare "${folders[@]}" --limit "$n" --out "$OUT" >> "$OUT/progress.log" 2>&1
  echo "$(date -u +%FT%TZ) round $n done" >> "$OUT/progress.log"
done
