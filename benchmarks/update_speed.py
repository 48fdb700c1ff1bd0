"""Seconds of a Planner update's forward and backward passes: one pass per recorded turn against the
turns packed into few passes (training.packing), on real rollouts and the trained copy.

    .venv/bin/python benchmarks/update_speed.py BATCH.jsonl [--model DIR] [--dtype bfloat16]

BATCH.jsonl is a learner's batch file (`<data>/ttrl/batch.jsonl` while signals wait for their update;
copy it before the update empties it). The model defaults to the dequantised copy of the default
Planner under .mia/models. Each way scores every turn with gradients and runs the backward pass, as
`grpo_update` does, without an optimizer step; the table gives seconds, passes, tokens laid out, and
the largest difference between the two ways' log-probabilities (bfloat16 rounding).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_MODEL = REPO / ".mia" / "models" / "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.bfloat16"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batch", type=Path)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--max-pack-tokens", type=int, default=None, help="default: training.packing's")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    import torch

    from training.packing import MAX_PACK_TOKENS, pack, packed_logprobs
    from training.policy import LoraSettings, PolicyChatModel, TurnSample

    groups = [json.loads(line) for line in args.batch.read_text(encoding="utf-8").splitlines() if line.strip()]
    samples = [TurnSample(s["prompt_ids"], s["completion_ids"]) for g in groups for rollout in g["samples"]
               for s in rollout]
    policy = PolicyChatModel(args.model, lora=LoraSettings(), dtype=getattr(torch, args.dtype))
    model = policy.model
    model.train()
    budget = args.max_pack_tokens or MAX_PACK_TOKENS
    results = {}
    for name, max_tokens in (("one pass per turn", 0), (f"packed (≤ {budget} tokens a pass)", budget)):
        packs = pack(samples, max_tokens=max_tokens)
        started = time.perf_counter()
        logprobs = {}
        for packed in packs:
            scored = packed_logprobs(model, packed, 1.0)
            sum(lp.sum() for lp in scored).backward()
            logprobs.update((m, lp.detach()) for m, lp in zip(packed.members, scored))
        seconds = time.perf_counter() - started
        model.zero_grad(set_to_none=True)
        results[name] = (seconds, len(packs), sum(p.tokens for p in packs), logprobs)
    (_, _, _, first), *_ = results.values()
    print(f"{len(groups)} questions, {len(samples)} turns, {sum(len(s.completion_ids) for s in samples)} sampled "
          f"tokens; {args.model.name} in {args.dtype}, {torch.get_num_threads()} threads, load "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}\n")
    print("| scoring | passes | tokens laid out | seconds (forward + backward) | max abs log-prob difference |")
    print("|---|---|---|---|---|")
    for name, (seconds, passes, tokens, logprobs) in results.items():
        diff = max(float((logprobs[m] - first[m]).abs().max()) for m in first if len(first[m]))
        print(f"| {name} | {passes} | {tokens} | {seconds:.1f} | {diff:.4f} |")


if __name__ == "__main__":
    main()
