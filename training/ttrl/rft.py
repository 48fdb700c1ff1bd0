"""Rejection-sampling fine-tuning (RFT) of the Planner: learn the plans that verifiably worked.

A cheaper learner beside GRPO (`ttrl.learner = "rft"`). The product already stores each run as a
memory labelled by its verified outcome; a signal about a run whose memory is a verified success
becomes one supervised example, with no rollouts: the Planner's prompt as the app built it (the
question, the memories it would be shown, without the run's own memory) and the plan it wrote. The
update maximises the plan's log-likelihood under the LoRA; the canary and the promotion are
GRPO's. A plan of sub-questions is learned as the Planner writes one: the decomposition prompt with
the worked examples it would be shown, and the sub-questions as they were researched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from backend.manager import Manager
from backend.hops import readable_decomposition
from backend.prompts.planner import DECOMPOSE_PREFILL, PLAN_PREFILL, decompose_messages, decomposition_text, plan_messages
from memory_db.provenance import read_provenance
from memory_db import Memory, MemoryNotFoundError
from training.datasets import memories_text
from training.episode import EpisodeSettings
from training.grpo import UpdateStats
from training.packing import pack, packed_logprobs
from training.policy import PolicyChatModel, TurnSample
from training.ttrl.signals import Signal

FEEDBACK_PREFIX = "feedback:"
SCAN_LIMIT = 2000  # memories searched for the run's memory when a signal does not name it (queued before it did)


def successful_memory(manager: Manager, signal: Signal) -> Memory | None:
    """The verified successful memory of the run a feedback signal is about, or None."""
    if not signal.source.startswith(FEEDBACK_PREFIX):
        return None
    run_id = signal.source[len(FEEDBACK_PREFIX):]
    if signal.memory_id:
        try:
            candidates = [manager.store.get(signal.memory_id, namespace=signal.namespace)]
        except MemoryNotFoundError:  # deleted since the feedback
            return None
    else:
        candidates = manager.store.list(namespace=signal.namespace, limit=SCAN_LIMIT)
    for memory in candidates:
        provenance = read_provenance(memory.provenance)
        if provenance.run_id == run_id:
            return memory if memory.correct and provenance.verified and memory.plan.strip() else None
    return None


def subquestions_of(memory: Memory) -> list[str]:
    """The sub-questions of a memory's plan of sub-questions as researched, or [] for a plan of steps."""
    hops = read_provenance(memory.provenance).decomposition
    return [hop["template"] for hop in hops] if readable_decomposition(hops) else []


def plan_sample(policy: PolicyChatModel, manager: Manager, memory: Memory, *, tools_text: str,
                settings: EpisodeSettings) -> TurnSample | None:
    """The Planner turn that writes `memory`'s plan, as the app prompts it: the memories it would be
    shown for the question (never the memory itself), and the plan after the Planner's prefill; for
    `settings.plan_shape` "subquestions", the decomposition turn with the worked examples among those
    memories. None when the run planned in the other shape: the Planner's turn now is not the one it
    took."""
    from backend.episode import planner_memories

    subquestions = subquestions_of(memory)
    if (settings.plan_shape == "subquestions") != bool(subquestions):
        return None
    successful, failed = planner_memories(manager, memory.question, memory.namespace, memory.caption, settings)
    successful = [m for m in successful if m["id"] != memory.id]
    failed = [m for m in failed if m["id"] != memory.id]
    shown = memories_text(successful, failed, settings.plan_shape)
    if subquestions:
        messages = decompose_messages(memory.question, shown, memory.caption)
        plan, prefill = decomposition_text(subquestions), DECOMPOSE_PREFILL
    else:
        messages = plan_messages(memory.question, shown, tools_text, memory.caption)
        plan = memory.plan.strip()
        prefill = PLAN_PREFILL if plan.startswith(PLAN_PREFILL) else ""
    completion = policy.encode(plan[len(prefill):]) + [policy.tokenizer.eos_token_id]
    return TurnSample(policy.prompt_ids(messages, prefill), completion)


def rft_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: Sequence[TurnSample], *,
               temperature: float = 1.0, max_grad_norm: float = 1.0,
               before_each: Callable[[], None] | None = None) -> UpdateStats:
    """One optimizer step on the mean negative log-likelihood of every plan token, the examples scored
    in packs as GRPO's update scores its turns (training.packing)."""
    total_tokens = sum(len(sample.completion_ids) for sample in samples)
    if total_tokens == 0:
        return UpdateStats(loss=0.0, tokens=0, clipped_fraction=0.0, grad_norm=0.0)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_value = 0.0
    for packed in pack(samples):
        if before_each is not None:
            before_each()
        loss = -sum(logprobs.sum() for logprobs in packed_logprobs(model, packed, temperature)) / total_tokens
        loss.backward()
        loss_value += float(loss.detach())
    grad_norm = float(torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], max_grad_norm))
    optimizer.step()
    model.eval()
    return UpdateStats(loss=loss_value, tokens=total_tokens, clipped_fraction=0.0, grad_norm=grad_norm)
