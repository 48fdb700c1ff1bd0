"""GRPO, compactly: group-normalised advantages and a clipped policy-gradient update, no KL term.

Each episode (one rollout of one question) is a list of recorded turns; every sampled token of
every turn gets the episode's advantage. The loss is the mean over all sampled tokens in the
batch (token-level averaging, as in DAPO and verl's "token-mean"), so long episodes are not
down-weighted per token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from training.packing import pack, packed_logprobs
from training.policy import TurnSample

ADVANTAGE_EPS = 1e-6  # the same epsilon verl's GRPO advantage uses


def group_advantages(rewards: Sequence[float], group_size: int) -> list[float]:
    """(r - mean of its group) / (std of its group + eps); groups are consecutive runs of `group_size`.

    A group whose rollouts all scored the same gets advantage 0 (no learning signal), as in verl.
    """
    if group_size < 1 or len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}.")
    scores = torch.tensor(list(rewards), dtype=torch.float32).view(-1, group_size)
    mean = scores.mean(dim=1, keepdim=True)
    std = scores.std(dim=1, keepdim=True) if group_size > 1 else torch.ones_like(mean)
    return ((scores - mean) / (std + ADVANTAGE_EPS)).view(-1).tolist()


def completion_logprobs(model: torch.nn.Module, sample: TurnSample, temperature: float) -> torch.Tensor:
    """Log-probability of each sampled token given everything before it, one turn in its own pass (the
    updates score turns packed, training.packing, which must equal this). Only the positions that
    predict sampled tokens get logits (the prompt's would be a vocabulary-wide row per prompt token)."""
    ids = torch.tensor([sample.prompt_ids + sample.completion_ids])
    kept = len(sample.completion_ids) + 1  # the last prompt position predicts the first sampled token
    logits = model(input_ids=ids, use_cache=False, logits_to_keep=kept).logits[0, :-1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(sample.completion_ids)[:, None]).squeeze(1)


@dataclass
class UpdateStats:
    loss: float
    tokens: int
    clipped_fraction: float
    grad_norm: float


def same_turns_once(work: list[tuple[TurnSample, float]]) -> tuple[list[tuple[TurnSample, float]], list[int]]:
    """Each distinct (turn, advantage) once, with how many times it came: rollouts of a question that
    sampled the same plan (or the same decision on the same prompt) and scored alike have the same
    loss term, so it is computed once and counted that many times (exactly the same loss and gradient)."""
    kept: dict[tuple, int] = {}
    distinct: list[tuple[TurnSample, float]] = []
    copies: list[int] = []
    for sample, advantage in work:
        key = (tuple(sample.prompt_ids), tuple(sample.completion_ids), advantage)
        if key in kept:
            copies[kept[key]] += 1
            continue
        kept[key] = len(distinct)
        distinct.append((sample, advantage))
        copies.append(1)
    return distinct, copies


def grpo_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    episodes: Sequence[tuple[list[TurnSample], float]],
    *,
    temperature: float,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    updates_per_batch: int = 1,
    max_grad_norm: float = 1.0,
    before_each: Callable[[], None] | None = None,
) -> UpdateStats:
    """`updates_per_batch` optimizer steps on (turn samples, advantage) pairs, the turns scored in packs
    (training.packing: the same values as one pass per turn, in fewer passes); `before_each` runs
    before each pack's forward and backward pass (the learner waits there while users' questions run)."""
    work, copies = same_turns_once(
        [(sample, advantage) for samples, advantage in episodes for sample in samples if advantage != 0.0])
    total_tokens = sum(len(sample.completion_ids) * n for (sample, _), n in zip(work, copies))
    if total_tokens == 0:  # every group scored the same: nothing to learn from this batch
        return UpdateStats(loss=0.0, tokens=0, clipped_fraction=0.0, grad_norm=0.0)
    packs = pack([sample for sample, _ in work])
    old_logprobs: dict[int, torch.Tensor] = {}
    if updates_per_batch > 1:  # a second pass needs the sampling-time log-probabilities
        with torch.no_grad():
            for packed in packs:
                old_logprobs.update(zip(packed.members, packed_logprobs(model, packed, temperature)))
    model.train()
    loss_value, clipped, grad_norm = 0.0, 0, 0.0
    for _ in range(updates_per_batch):
        optimizer.zero_grad(set_to_none=True)
        loss_value, clipped = 0.0, 0
        for packed in packs:
            if before_each is not None:
                before_each()
            loss = torch.zeros(())
            for member, logprobs in zip(packed.members, packed_logprobs(model, packed, temperature)):
                advantage, n = work[member][1], copies[member]
                old = old_logprobs[member] if old_logprobs else logprobs.detach()
                ratio = torch.exp(logprobs - old)
                unclipped = ratio * advantage
                bounded = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantage
                loss = loss - n * torch.minimum(unclipped, bounded).sum() / total_tokens
                clipped += n * int((bounded != unclipped).sum())
            loss.backward()  # one pack at a time keeps peak memory at one pack's activations
            loss_value += float(loss.detach())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], max_grad_norm))
        optimizer.step()
    model.eval()
    return UpdateStats(loss=loss_value, tokens=total_tokens, clipped_fraction=clipped / total_tokens, grad_norm=grad_norm)
