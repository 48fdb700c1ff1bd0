"""A greedy call made again is answered from the first time, on a real (tiny) model; sampled calls
are always made."""

from __future__ import annotations

from backend.llm.base import Completion
from backend.llm.memo import RepeatedCalls
from tests.counting_model import Counting

MESSAGES = [{"role": "user", "content": "Name a city in France."}]


def test_a_greedy_call_made_again_costs_nothing_and_returns_the_same(tiny_chat_model):
    counting = Counting(tiny_chat_model)
    model = RepeatedCalls(counting)
    first = model.generate(MESSAGES, max_new_tokens=6)
    again = model.generate(MESSAGES, max_new_tokens=6)
    assert counting.calls == 1 and model.hits == 1
    assert again.text == first.text and again.seconds == 0.0 and again.cached_tokens == again.prompt_tokens
    # A stream of the same turn replays the text, then the completion.
    parts = list(model.stream(MESSAGES, max_new_tokens=6))
    assert counting.calls == 1 and "".join(p for p in parts if isinstance(p, str)) == first.text
    assert isinstance(parts[-1], Completion) and parts[-1].text == first.text
    # Another prompt, another length or another prefill is another call.
    model.generate(MESSAGES, max_new_tokens=7)
    model.generate(MESSAGES, max_new_tokens=6, prefill="Paris")
    assert counting.calls == 3
    # The model's own attributes show through.
    assert model.name == tiny_chat_model.name and model.traits == tiny_chat_model.traits


def test_sampled_calls_are_always_made_and_choices_are_kept(tiny_chat_model):
    counting = Counting(tiny_chat_model)
    model = RepeatedCalls(counting)
    model.generate(MESSAGES, max_new_tokens=4, temperature=0.8)
    model.generate(MESSAGES, max_new_tokens=4, temperature=0.8)
    list(model.stream(MESSAGES, max_new_tokens=4, temperature=0.8))
    assert counting.calls == 3 and model.hits == 0
    first = model.choose(MESSAGES, ["Paris", "Lyon"])
    assert model.choose(MESSAGES, ["Paris", "Lyon"]) == first and counting.calls == 4
    model.choose(MESSAGES, ["Lyon", "Paris"])  # other options: another call
    assert counting.calls == 5


def test_the_oldest_answer_goes_first_when_full(tiny_chat_model):
    counting = Counting(tiny_chat_model)
    model = RepeatedCalls(counting, max_entries=1)
    model.generate(MESSAGES, max_new_tokens=3)
    model.generate(MESSAGES, max_new_tokens=4)  # pushes the first out
    model.generate(MESSAGES, max_new_tokens=3)
    assert counting.calls == 3
    model.generate(MESSAGES, max_new_tokens=3)
    assert counting.calls == 3


def test_answers_kept_in_a_call_file_serve_another_process_of_the_same_model(tiny_chat_model, tmp_path):
    from backend.llm.memo import CallFile

    path = tmp_path / "executor-calls.jsonl"
    first_counting = Counting(tiny_chat_model)
    first = RepeatedCalls(first_counting, shared=CallFile(path))
    written = first.generate(MESSAGES, max_new_tokens=6)
    chosen = first.choose(MESSAGES, ["Paris", "Lyon"])
    with path.open("a", encoding="utf-8") as file:
        file.write('{"key": "cut off mid-wri')  # a process stopped while writing its last line

    # Another learner (another process: the file read afresh) asks the same of the same model.
    counting = Counting(tiny_chat_model)
    other = RepeatedCalls(counting, shared=CallFile(path))
    again = other.generate(MESSAGES, max_new_tokens=6)
    assert counting.calls == 0 and other.hits == 1
    assert again.text == written.text and again.prompt_tokens == written.prompt_tokens and again.seconds == 0.0
    assert other.choose(MESSAGES, ["Paris", "Lyon"]) == chosen and counting.calls == 0
    streamed = list(other.stream(MESSAGES, max_new_tokens=6))
    assert counting.calls == 0 and streamed[-1].text == written.text
    other.generate(MESSAGES, max_new_tokens=7)  # not asked before: made, and kept for the next
    assert counting.calls == 1 and len(CallFile(path)) == 3


def test_a_call_file_answers_only_the_model_that_wrote_it(tiny_chat_model, tmp_path):
    from backend.llm.memo import CallFile

    path = tmp_path / "executor-calls.jsonl"
    RepeatedCalls(tiny_chat_model, shared=CallFile(path)).generate(MESSAGES, max_new_tokens=6)

    class Renamed(Counting):
        name = "another-model"

    counting = Renamed(tiny_chat_model)
    RepeatedCalls(counting, shared=CallFile(path)).generate(MESSAGES, max_new_tokens=6)
    assert counting.calls == 1
