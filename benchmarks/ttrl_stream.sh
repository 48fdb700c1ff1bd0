#!/usr/bin/env bash
# The paper's test-time learning protocol on a stream of dev questions (issue: learning measured the way
# the paper measures it). Each variant streams the same N questions in file order: K rollouts per question
# from the current Planner, the reported answer chosen without the ground truth (ttrl.selection), the
# ground truth then scores the rollouts, memories are consolidated, and the Planner is updated every B
# questions (grpo, rft) or never (none). The answers reported for a batch come before its update.
# Paired rows: `none` and one-rollout `mia` from the evaluation harness on the same questions.
# Every stage resumes: run the script again and reported questions are skipped. One job at a time.
# In rounds (ROUNDS, e.g. "24 48 ... 150"): every stream and evaluation reaches a round's N before any goes
# further, and each round ends with the table at that N, so a run stopped anywhere leaves paired rows.
# Usage: bash benchmarks/ttrl_stream.sh [OUT]   (default .mia/ttrl-stream, not kept in git)
# Environment: N (150), ROUNDS (default: N, one round), K (4), B (4), SELECTION (memory | majority),
#   DATA (data/hotpotqa/dev.jsonl),
#   SAMPLER (auto | transformers | llamacpp: where rollouts are sampled, ttrl.sampler), VARIANTS (the streams,
#   default "none grpo rft"), EVALS (the paired evaluations, default "none mia"), PAIRED (folders of
#   evaluations already run on the same questions in the same order, e.g. the 300-question table's, paired
#   instead of running EVALS: give EVALS= with it), SHARE (1: the variants share the frozen Executor's
#   greedy turns, ttrl.shared_executor_calls, so a variant planning a question as an earlier one did reads
#   its turns: the first variant's seconds per signal are the learner's own, the later ones' less; 0: off).
#   TAG (a name for the variants' folders, k4-rft-TAG: a run with other [ttrl] settings, given as MIA_TTRL_*
#   in the environment), REFERENCE (the folder name the table pairs against; default k4-none).
#   Seconds per signal and
#   per update, and the machine's load (load.log), land in the table; e.g. the sampler's speed alone:
#   SAMPLER=llamacpp N=8 DATA=data/hotpotqa/train.jsonl VARIANTS=grpo EVALS= bash benchmarks/ttrl_stream.sh
set -uo pipefail
cd "$(dirname "$0")/.."
N="${N:-150}"; ROUNDS="${ROUNDS:-$N}"; K="${K:-4}"; B="${B:-4}"; SELECTION="${SELECTION:-memory}"
DATA="${DATA:-data/hotpotqa/dev.jsonl}"
SAMPLER="${SAMPLER:-auto}"
VARIANTS="${VARIANTS-none grpo rft}"; EVALS="${EVALS-none mia}"; SHARE="${SHARE:-1}"
OUT="${1:-.mia/ttrl-stream}/$(basename "$DATA" .jsonl)-$N-$SAMPLER"
APP_DATA="$(.venv/bin/python -c 'from backend.config import load_config; print(load_config().data_dir)')"
mkdir -p "$OUT"
export OMP_WAIT_POLICY=PASSIVE
source benchmarks/common.sh
sample_load "$OUT/load.log"

folder_of() { echo "$OUT/k$K-$1${TAG:+-$TAG}"; }

stream() {  # stream VARIANT LIMIT: its own memory and learning folder; the app's models and index are shared
  local folder; folder="$(folder_of "$1")"
  mkdir -p "$folder"
  ln -sfn "$APP_DATA/models" "$folder/models"
  ln -sfn "$APP_DATA/index" "$folder/index"
  echo "$(date -u +%FT%TZ) $(basename "$folder") -> $2" >> "$OUT/progress.log"
  MIA_TTRL_LEARNER="$1" MIA_TTRL_SELECTION="$SELECTION" MIA_TTRL_ROLLOUTS_PER_SIGNAL="$K" MIA_TTRL_SAMPLER="$SAMPLER" \
  MIA_TTRL_SIGNALS_PER_UPDATE="$B" MIA_TTRL_ROLLOUTS_PER_HOUR=1000000 \
  MIA_TTRL_SHARED_EXECUTOR_CALLS="$([ "$SHARE" = 1 ] && echo "$OUT/executor-calls.jsonl")" \
    /usr/bin/time -a -o "$folder/peak_rss_kb.txt" -f "%M" \
    .venv/bin/python -m training ttrl --data "$DATA" --limit "$2" --namespace stream --data-dir "$folder" \
      >> "$folder.log" 2>&1 || { echo "$(date -u +%FT%TZ) $(basename "$folder") failed, see $folder.log" >> "$OUT/progress.log"; exit 1; }
}

evaluate() {  # evaluate METHOD LIMIT
  echo "$(date -u +%FT%TZ) $1 -> $2" >> "$OUT/progress.log"
  .venv/bin/python -m backend.eval --method "$1" --data "$DATA" --limit "$2" --no-progress --out "$OUT/$1" \
      ${ACCEPT_CODE_CHANGE:+--accept-code-change} >> "$OUT/$1.log" 2>&1 \
    || { echo "$(date -u +%FT%TZ) $1 failed, see $OUT/$1.log" >> "$OUT/progress.log"; exit 1; }
}

reference="$(basename "$(folder_of none)")"
case " $VARIANTS " in *" none "*) ;; *) reference="" ;; esac
reference="${REFERENCE:-$reference}"
for n in $ROUNDS; do
  for variant in $VARIANTS; do stream "$variant" "$n"; done
  for method in $EVALS; do evaluate "$method" "$n"; done
  folders=()
  for name in $EVALS; do folders+=("$OUT/$name"); done
  for folder in ${PAIRED:-}; do folders+=("$folder"); done
  for variant in $VARIANTS; do folders+=("$(folder_of "$variant")"); done
  .venv/bin/python -m training.ttrl.stream_table "${folders[@]}" --reference "${reference:-$(basename "${folders[0]}")}" \
      --limit "$n" --out "$OUT/table-$n"
  echo "$(date -u +%FT%TZ) round $n done: $OUT/table-$n/stream.md" >> "$OUT/progress.log"
done
