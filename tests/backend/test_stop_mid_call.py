"""Stop acts during a model call, not after it: a local model's decoding (backend.llm.decoding) ends at
its next token, and a choice under way is left unread; the run then raises StopRequested at once."""

from __future__ import annotations

import threading
import time

import pytest

from backend.llm.base import Choice, Completion, ModelTraits
from backend.llm.decoding import collect_text, stream_in_thread
from backend.metering import MeteredModel, RunMeter, StopRequested


class SlowLocalModel:
    """A local model's decoding loop (stream_in_thread + collect_text, as llama.cpp and transformers run
    it) whose every token waits for the test to release it (`step`): the test decides how far it gets."""

    name, supports_images = "slow-local", False
    traits = ModelTraits()

    def __init__(self) -> None:
        self.step = threading.Semaphore(0)
        self.tokens_made = 0
        self.finished = threading.Event()
        self.finish_reason = ""
        self.choosing = threading.Event()
        self.release_choice = threading.Event()
        self.limit = 1000

    def _tokens(self):
        for token_id in range(self.limit):
            assert self.step.acquire(timeout=30), "the test never released the next token"
            self.tokens_made += 1
            yield token_id, None

    def stream(self, messages, **kwargs):
        def produce(emit, cancelled):
            decoded = collect_text(self._tokens(), decode=lambda ids: " x" * len(ids), end_ids=set(), stops=(),
                                   emit=emit, cancelled=cancelled)
            self.finish_reason = decoded.finish_reason
            self.finished.set()
            return Completion(text=decoded.text, prompt_tokens=1, completion_tokens=decoded.produced, seconds=0.0,
                              finish_reason=decoded.finish_reason)

        return stream_in_thread(produce, "slow-decode")

    def generate(self, messages, **kwargs):
        final = None
        for item in self.stream(messages, **kwargs):
            if isinstance(item, Completion):
                final = item
        return final

    def choose(self, messages, options, **kwargs):
        self.choosing.set()
        assert self.release_choice.wait(30), "the test never released the choice"
        return Choice(label=options[0], logprobs={o: 0.0 for o in options}, method="slow")

    def count_tokens(self, text):
        return len(text.split())


def test_a_generation_under_way_ends_soon_after_stop_and_its_decoding_stops():
    model, stop = SlowLocalModel(), threading.Event()
    metered = MeteredModel(model, RunMeter(), "executor", stop.is_set)
    outcome: list = []

    def call():
        try:
            outcome.append(metered.generate([{"role": "user", "content": "q"}], max_new_tokens=1000))
        except StopRequested as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    stop.set()  # pressed while the model is still on its first token
    pressed = time.monotonic()
    caller.join(timeout=5)
    assert not caller.is_alive() and isinstance(outcome[0], StopRequested)
    assert time.monotonic() - pressed < 1.0
    model.step.release()  # the model's next token: the producer sees the cancellation and ends
    assert model.finished.wait(5) and model.finish_reason == "cancelled"
    assert model.tokens_made == 1


def test_a_stream_under_way_raises_stop_requested_without_its_final_completion():
    model, stop = SlowLocalModel(), threading.Event()
    metered = MeteredModel(model, RunMeter(), "executor", stop.is_set)
    stream = metered.stream([{"role": "user", "content": "q"}])
    model.step.release()
    first = next(stream)
    assert isinstance(first, str)
    stop.set()
    started = time.monotonic()
    with pytest.raises(StopRequested):
        for _ in stream:
            pass
    assert time.monotonic() - started < 1.0
    model.step.release()
    assert model.finished.wait(5) and model.finish_reason == "cancelled" and model.tokens_made == 2


def test_a_choice_under_way_is_left_unread_once_stopped():
    model, stop = SlowLocalModel(), threading.Event()
    metered = MeteredModel(model, RunMeter(), "judge", stop.is_set)
    outcome: list = []

    def call():
        try:
            outcome.append(metered.choose([{"role": "user", "content": "q"}], ["yes", "no"]))
        except StopRequested as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert model.choosing.wait(5)
    stop.set()
    caller.join(timeout=5)
    assert isinstance(outcome[0], StopRequested)
    model.release_choice.set()


def test_without_stop_a_choice_and_a_generation_answer_as_before():
    model = SlowLocalModel()
    model.step.release(3)
    model.release_choice.set()
    model.limit = 3
    metered = MeteredModel(model, RunMeter(), "judge", threading.Event().is_set)
    assert metered.choose([{"role": "user", "content": "q"}], ["yes", "no"]).label == "yes"
    completion = metered.generate([{"role": "user", "content": "q"}], max_new_tokens=3)
    assert (completion.text, completion.finish_reason) == (" x x x", "length")


def test_a_stream_whose_pieces_never_pause_still_stops_at_once():
    """Pieces every 5 ms leave the waiting consumer no gap to notice Stop in: it is checked before each."""
    model, stop = SlowLocalModel(), threading.Event()
    tokens = model._tokens

    def steady():  # a token every 5 ms, as a fast model streams
        for token in tokens():
            time.sleep(0.005)
            yield token

    model._tokens = steady
    model.step.release(1000)
    metered = MeteredModel(model, RunMeter(), "executor", stop.is_set)
    stream = metered.stream([{"role": "user", "content": "q"}])
    assert isinstance(next(stream), str)
    stop.set()
    started = time.monotonic()
    with pytest.raises(StopRequested):
        for _ in stream:
            pass
    assert time.monotonic() - started < 0.5
    assert model.finished.wait(5) and model.finish_reason == "cancelled" and model.tokens_made < 200
