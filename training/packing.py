"""Several sampled turns scored in one forward pass.

An update scores every recorded turn of a batch with a teacher-forced pass of the trained copy. Turns
are packed into one sequence under a block mask, each completion attending to its own prompt and to
its own earlier tokens, with positions restarting per turn as in separate passes: the same
log-probabilities, and the same gradients, as one pass per turn. A prompt that several turns share
(a question's rollouts all start from the same Planner prompt) is laid out once and every completion
attends to it, so its tokens are computed once and its gradient is the sum of theirs. That is where
the time goes: on this CPU the passes are bound by arithmetic, so fewer tokens laid out is the saving
(benchmarks/update_speed.py: 5,745 tokens instead of 7,171 on a real batch, 268 s instead of 359 s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.utils.checkpoint import checkpoint

from training.policy import TurnSample

MAX_PACK_TOKENS = 2048  # tokens in one packed pass: the attention mask is this squared
# Sampled positions whose vocabulary-wide logits exist at once. A pack predicts up to ~2,000 tokens,
# and their float32 logits, log-softmax and gradients over Qwen's 151,936 words held together are
# gigabytes; 256 rows at a time, recomputed in the backward pass, are about 150 MB each.
LOGIT_ROWS = 256


@dataclass
class Pack:
    """Turns packed into one sequence: `members[i]` indexes the caller's list of samples."""

    prompts: list[list[int]] = field(default_factory=list)
    completions: list[list[tuple[int, list[int]]]] = field(default_factory=list)  # per prompt: (member, ids)

    @property
    def tokens(self) -> int:
        return sum(len(p) + sum(len(ids) for _, ids in c) for p, c in zip(self.prompts, self.completions))

    @property
    def members(self) -> list[int]:
        return [member for group in self.completions for member, _ in group]


def pack(samples: Sequence[TurnSample], max_tokens: int = MAX_PACK_TOKENS) -> list[Pack]:
    """The samples in packs of at most `max_tokens` tokens (a sample longer than that alone), samples
    with the same prompt next to one prompt; every sample with a completion is in exactly one pack."""
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for index, sample in enumerate(samples):
        if sample.completion_ids:
            by_prompt.setdefault(tuple(sample.prompt_ids), []).append(index)
    packs: list[Pack] = []
    current = Pack()
    for prompt, members in by_prompt.items():
        for member in members:
            ids = list(samples[member].completion_ids)
            shares_prompt = bool(current.prompts) and tuple(current.prompts[-1]) == prompt
            added = len(ids) + (0 if shares_prompt else len(prompt))
            if current.prompts and current.tokens + added > max_tokens:
                packs.append(current)
                current, shares_prompt = Pack(), False
            if not shares_prompt:
                current.prompts.append(list(prompt))
                current.completions.append([])
            current.completions[-1].append((member, ids))
    if current.prompts:
        packs.append(current)
    return packs


def packed_logprobs(model: torch.nn.Module, packed: Pack, temperature: float) -> list[torch.Tensor]:
    """Each member's per-token log-probabilities (in `packed.members` order), from one pass."""
    ids: list[int] = []
    positions: list[int] = []
    prompt_of: list[int] = []  # which prompt each token belongs to
    completion_of: list[int] = []  # which completion (-1: a prompt token)
    kept: list[int] = []  # the positions whose logits predict a sampled token, member after member
    targets: list[int] = []
    spans: list[int] = []
    completion = 0
    for group, (prompt, completions) in enumerate(zip(packed.prompts, packed.completions)):
        start = len(ids)
        ids += prompt
        positions += range(len(prompt))
        prompt_of += [group] * len(prompt)
        completion_of += [-1] * len(prompt)
        prompt_end = start + len(prompt) - 1
        for _, sampled in completions:
            first = len(ids)
            ids += sampled
            positions += range(len(prompt), len(prompt) + len(sampled))
            prompt_of += [group] * len(sampled)
            completion_of += [completion] * len(sampled)
            kept += [prompt_end] + list(range(first, first + len(sampled) - 1))
            targets += sampled
            spans.append(len(sampled))
            completion += 1
    prompt_ids, completion_ids = torch.tensor(prompt_of), torch.tensor(completion_of)
    order = torch.arange(len(ids))
    allowed = ((prompt_ids[:, None] == prompt_ids[None, :]) & (order[None, :] <= order[:, None])
               & ((completion_ids[None, :] == -1) | (completion_ids[None, :] == completion_ids[:, None])))
    dtype = next(model.parameters()).dtype
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]
    hidden = model.get_decoder()(input_ids=torch.tensor([ids]), attention_mask=mask,
                                 position_ids=torch.tensor([positions]), use_cache=False).last_hidden_state[0, kept]
    head = model.get_output_embeddings()
    pieces = []
    for rows, wanted in zip(hidden.split(LOGIT_ROWS), torch.tensor(targets).split(LOGIT_ROWS)):
        if torch.is_grad_enabled():  # keep no logits for the backward pass: it recomputes them per chunk
            pieces.append(checkpoint(_token_logprobs, head, rows, wanted, temperature, use_reentrant=False))
        else:
            pieces.append(_token_logprobs(head, rows, wanted, temperature))
    return list(torch.split(torch.cat(pieces), spans))


def _token_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor,
                    temperature: float) -> torch.Tensor:
    logits = head(hidden).float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, targets[:, None]).squeeze(1)
