"""The contract every role speaks to: a chat model that generates, streams and chooses.

Messages are OpenAI-style dicts ``{"role": "system" | "user" | "assistant", "content": str}``; a
user message may carry ``"image": "/path/to/file.png"`` which only image-capable backends use.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class LLMError(RuntimeError):
    """A model call failed; the message is a sentence for the user saying what failed and what to do."""


@dataclass
class TokenLogprob:
    """One generated (or scored) token with its log-probability and the most likely alternatives."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class Completion:
    text: str  # the continuation only (never includes `prefill`), stop string removed
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str  # "stop" (EOS or a stop string) | "length" | "cancelled" (the run was stopped)
    # Per-token details, filled only when a backend was asked for them (the local server uses them).
    logprobs: list[TokenLogprob] | None = None
    cached_tokens: int = 0  # prompt tokens a local backend found in its cache instead of reading them again


@dataclass
class Choice:
    label: str  # always one of the options
    logprobs: dict[str, float]  # option -> summed log-probability of the option's tokens
    method: str  # "logprob" | "guided" | "first-token-logprob"


@dataclass(frozen=True)
class ModelTraits:
    """What the loop needs to know about a model, declared by its backend instead of asked of its name.

    `small`: the model breaks free-form formats, so the loop guides its turns (thought, constrained
    choice of action, prefilled arguments), gives it tighter limits and the Judge requires word
    overlap before it may call an answer correct. `max_stop_strings`: how many stop strings one
    request may carry (vLLM and OpenAI accept 4); None = no limit. `context_tokens`: the prompt
    window the reader's evidence must fit in. `executor_turns`: the Executor's turns per plan when
    agent.max_turns is automatic (a CPU model pays seconds a turn; a served one can search longer).
    `guided_turns`: the Executor's turns are guided when agent.guided_actions is "auto" (models that
    end their turn after a thought instead of writing the action themselves)."""

    small: bool = False
    guided_turns: bool = False
    max_stop_strings: int | None = None
    context_tokens: int = 4096
    executor_turns: int = 30


def fit_stop_strings(stop: Sequence[str], traits: ModelTraits) -> list[str]:
    """The stop strings a request may carry: the first `max_stop_strings` of them (callers list them
    most important first); a stop cut off here is applied to the text afterwards by the caller."""
    stops = [s for s in stop if s]
    return stops if traits.max_stop_strings is None else stops[: traits.max_stop_strings]


@runtime_checkable
class ChatModel(Protocol):
    name: str  # provenance id, e.g. "embedded:SmolLM2-135M-Instruct", "openai:<model>@<base_url>"
    supports_images: bool
    traits: ModelTraits

    def generate(
        self,
        messages: list[dict],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        prefill: str = "",
        temperature: float = 0.0,
    ) -> Completion: ...

    def stream(
        self,
        messages: list[dict],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        prefill: str = "",
        temperature: float = 0.0,
    ) -> Iterator[str | Completion]:
        """Yield text deltas as they form, then exactly one final Completion."""
        ...

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        """Score each option as the continuation of the assistant turn (after `prefill`); return the best."""
        ...

    def count_tokens(self, text: str) -> int: ...


def check_options(options: Sequence[str]) -> list[str]:
    """Validate the options of a constrained choice: at least one, none empty, no duplicates."""
    options = list(options)
    if not options:
        raise LLMError("choose() needs at least one option; pass the labels the model may pick from.")
    if any(not isinstance(option, str) or option == "" for option in options):
        raise LLMError("choose() options must be non-empty strings; remove the empty or non-text option.")
    if len(set(options)) != len(options):
        raise LLMError("choose() options must be distinct; remove the duplicated label.")
    return options


def check_messages(messages: list[dict]) -> None:
    """Reject malformed chat messages with a sentence naming the bad entry."""
    if not messages:
        raise LLMError("The chat is empty; send at least one message with a role and content.")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            raise LLMError(
                f"Message {index} needs a role of 'system', 'user' or 'assistant'; got {message!r:.80}."
            )
        if not isinstance(message.get("content"), str):
            raise LLMError(f"Message {index} ({message['role']}) needs its content as a string.")
