"""The embedded backend on the tiny random model: real tokenizer, real transformers forward passes."""

from __future__ import annotations

import threading

import pytest
import torch

from backend.llm.base import ChatModel, Completion, LLMError
from backend.llm.embedded import EmbeddedChatModel, get_embedded_model

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colours."}]


def test_it_implements_the_chat_model_protocol(tiny_chat_model):
    assert isinstance(tiny_chat_model, ChatModel)
    assert tiny_chat_model.name == "embedded:tiny-random-SmolLM2"
    assert tiny_chat_model.supports_images is False


def test_max_new_tokens_ends_with_length_and_counts_are_real(tiny_chat_model):
    completion = tiny_chat_model.generate(CHAT, max_new_tokens=12)
    assert completion.finish_reason == "length"
    assert completion.completion_tokens == 12
    prompt_text = tiny_chat_model.tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert completion.prompt_tokens == len(tiny_chat_model.tokenizer(prompt_text).input_ids)
    assert completion.text == tiny_chat_model.tokenizer.decode(
        _greedy_ids(tiny_chat_model, prompt_text, 12), clean_up_tokenization_spaces=False)
    assert completion.seconds > 0


def test_greedy_generation_is_deterministic_and_sampling_is_not_forced_greedy(tiny_chat_model):
    first = tiny_chat_model.generate(CHAT, max_new_tokens=8)
    assert tiny_chat_model.generate(CHAT, max_new_tokens=8).text == first.text
    torch.manual_seed(1)
    samples = {tiny_chat_model.generate(CHAT, max_new_tokens=8, temperature=1.5).text for _ in range(3)}
    assert len(samples) > 1


def test_a_stop_string_cuts_the_text_and_finishes_with_stop(tiny_chat_model):
    full = tiny_chat_model.generate(CHAT, max_new_tokens=20).text
    stop = full[len(full) // 2: len(full) // 2 + 3]  # a piece the model is known to produce
    cut = tiny_chat_model.generate(CHAT, max_new_tokens=20, stop=["never-produced", stop])
    assert cut.finish_reason == "stop"
    assert cut.text == full[: full.index(stop)]
    assert cut.completion_tokens < 20


def test_prefill_starts_the_turn_but_is_not_part_of_the_text(tiny_chat_model):
    prefill = "Thought: the colours are"
    completion = tiny_chat_model.generate(CHAT, max_new_tokens=6, prefill=prefill)
    prompt_text = tiny_chat_model.prompt_text(CHAT) + prefill
    assert not completion.text.startswith(prefill)
    assert completion.prompt_tokens == tiny_chat_model.count_tokens(prompt_text)
    assert completion.text == tiny_chat_model.tokenizer.decode(
        _greedy_ids(tiny_chat_model, prompt_text, 6), clean_up_tokenization_spaces=False)


def test_the_image_key_is_ignored(tiny_chat_model, tmp_path):
    with_image = [CHAT[0], {**CHAT[1], "image": str(tmp_path / "photo.png")}]
    assert tiny_chat_model.generate(with_image, max_new_tokens=5).text == tiny_chat_model.generate(
        CHAT, max_new_tokens=5).text


def test_stream_yields_deltas_that_join_to_the_final_text(tiny_chat_model):
    stop = tiny_chat_model.generate(CHAT, max_new_tokens=16).text[-4:]
    items = list(tiny_chat_model.stream(CHAT, max_new_tokens=16, stop=[stop]))
    deltas, final = items[:-1], items[-1]
    assert isinstance(final, Completion) and all(isinstance(d, str) and d for d in deltas)
    assert len(deltas) > 1
    assert "".join(deltas) == final.text
    assert final.text == tiny_chat_model.generate(CHAT, max_new_tokens=16, stop=[stop]).text
    assert stop not in final.text


def test_choose_returns_an_option_scored_by_summed_token_logprobs(tiny_chat_model):
    options = ["yes", "no", " maybe later", "Paris, France"]
    prefill = "Answer:"
    choice = tiny_chat_model.choose(CHAT, options, prefill=prefill)
    assert choice.method == "logprob"
    assert set(choice.logprobs) == set(options)
    assert choice.label == max(options, key=choice.logprobs.get)

    prompt_text = tiny_chat_model.prompt_text(CHAT, prefill)
    prompt_ids = tiny_chat_model.tokenizer(prompt_text).input_ids
    for option in options:
        full_ids = tiny_chat_model.tokenizer(prompt_text + option).input_ids
        assert full_ids[: len(prompt_ids)] == prompt_ids  # no BPE merge across this boundary
        with torch.no_grad():
            logits = tiny_chat_model.model(torch.tensor([full_ids])).logits[0]
        logprobs = torch.log_softmax(logits, dim=-1)
        by_hand = sum(float(logprobs[i - 1, full_ids[i]]) for i in range(len(prompt_ids), len(full_ids)))
        assert choice.logprobs[option] == pytest.approx(by_hand, abs=1e-4)


def test_choose_keeps_the_prompt_tokens_when_a_bpe_merge_crosses_the_boundary(tiny_chat_model):
    prefill = "The capital is"
    prompt_text = tiny_chat_model.prompt_text(CHAT, prefill)
    prompt_ids = tiny_chat_model.encode(prompt_text)
    assert tiny_chat_model.encode(prompt_text + "s")[: len(prompt_ids)] != prompt_ids  # "is"+"s" merges
    scored = tiny_chat_model.score_options(CHAT, ["s", "Paris"], prefill=prefill)
    assert [t.token for t in scored[0]] == ["s"]
    assert "".join(t.token for t in scored[1]) == "Paris"


def test_bad_input_gets_a_sentence_saying_what_to_do(tiny_chat_model):
    with pytest.raises(LLMError, match="at least one option"):
        tiny_chat_model.choose(CHAT, [])
    with pytest.raises(LLMError, match="distinct"):
        tiny_chat_model.choose(CHAT, ["a", "a"])
    with pytest.raises(LLMError, match="role"):
        tiny_chat_model.generate([{"role": "robot", "content": "hi"}])
    with pytest.raises(LLMError, match="context"):
        tiny_chat_model.generate([{"role": "user", "content": "word " * 9000}])
    with pytest.raises(LLMError, match="not a model folder"):
        EmbeddedChatModel(tiny_chat_model.model_dir.parent / "missing")


def test_two_threads_at_once_get_the_same_answers_as_one_at_a_time(tiny_chat_model):
    chats = [CHAT, [{"role": "user", "content": "What is the boiling point of water?"}]]
    expected = [tiny_chat_model.generate(chat, max_new_tokens=15).text for chat in chats]
    expected_choice = tiny_chat_model.choose(chats[1], ["yes", "no"]).logprobs
    results: dict[str, object] = {}

    def run(key: str, job) -> None:
        results[key] = job()

    jobs = {
        "generate": lambda: tiny_chat_model.generate(chats[0], max_new_tokens=15).text,
        "stream": lambda: [i for i in tiny_chat_model.stream(chats[1], max_new_tokens=15)][-1].text,
        "choose": lambda: tiny_chat_model.choose(chats[1], ["yes", "no"]).logprobs,
    }
    threads = [threading.Thread(target=run, args=item) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results["generate"] == expected[0]
    assert results["stream"] == expected[1]
    assert results["choose"] == pytest.approx(expected_choice)


def _in_thread(job, timeout: float = 60):
    """Run `job` on a new thread; its result, or the failure that a hung lock would be."""
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", job()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the model stayed locked"
    return result["value"]


def test_an_abandoned_stream_does_not_keep_the_model_locked(tiny_chat_model):
    expected = tiny_chat_model.generate(CHAT, max_new_tokens=12).text
    stream = tiny_chat_model.stream(CHAT, max_new_tokens=200)
    assert isinstance(next(stream), str)  # a browser tab closes after the first words: never resumed, never closed
    assert _in_thread(lambda: tiny_chat_model.generate(CHAT, max_new_tokens=12).text) == expected
    stream.close()
    assert _in_thread(lambda: tiny_chat_model.choose(CHAT, ["red", "blue"]).label) in ("red", "blue")


def test_a_stream_resumed_on_another_thread_finishes_and_frees_the_model(tiny_chat_model):
    """The web server may run each step of a streamed answer on a different worker thread."""
    expected = tiny_chat_model.generate(CHAT, max_new_tokens=16).text
    stream = tiny_chat_model.stream(CHAT, max_new_tokens=16)
    first = _in_thread(lambda: next(stream))
    rest = _in_thread(lambda: list(stream))
    assert first + "".join(item for item in rest if isinstance(item, str)) == expected == rest[-1].text
    assert _in_thread(lambda: tiny_chat_model.generate(CHAT, max_new_tokens=16).text) == expected


def test_get_embedded_model_loads_one_model_per_folder(tiny_model_dir):
    loaded = []
    threads = [threading.Thread(target=lambda: loaded.append(get_embedded_model(tiny_model_dir))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(loaded) == 3 and all(model is loaded[0] for model in loaded)
    assert get_embedded_model(tiny_model_dir / ".." / tiny_model_dir.name) is loaded[0]


def _greedy_ids(model: EmbeddedChatModel, prompt_text: str, count: int) -> list[int]:
    """Reference decoding with transformers' own generate() and the same repetition penalty."""
    from transformers import GenerationConfig

    prompt_ids = torch.tensor([model.tokenizer(prompt_text).input_ids])
    penalty = _GeneratedOnlyPenalty(model.repetition_penalty, prompt_ids.shape[1])
    config = GenerationConfig(max_new_tokens=count, min_new_tokens=count, do_sample=False,
                              eos_token_id=None, pad_token_id=model.tokenizer.pad_token_id)
    with torch.no_grad():
        out = model.model.generate(prompt_ids, generation_config=config, logits_processor=[penalty])
    return out[0, prompt_ids.shape[1]:].tolist()


class _GeneratedOnlyPenalty:
    """transformers' repetition penalty, restricted to generated tokens (as the embedded model does)."""

    def __init__(self, penalty: float, prompt_length: int) -> None:
        from transformers import RepetitionPenaltyLogitsProcessor

        self.inner = RepetitionPenaltyLogitsProcessor(penalty)
        self.prompt_length = prompt_length

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        generated = input_ids[:, self.prompt_length:]
        return scores if generated.shape[1] == 0 else self.inner(generated, scores)


def test_a_decoding_failure_reaches_the_caller_and_frees_the_model(tiny_chat_model, monkeypatch):
    expected = tiny_chat_model.generate(CHAT, max_new_tokens=8).text

    def fail(*args, **kwargs):
        raise RuntimeError("decoding failed")
        yield

    monkeypatch.setattr(tiny_chat_model, "_next_token_ids", fail)
    with pytest.raises(RuntimeError, match="decoding failed"):
        tiny_chat_model.generate(CHAT, max_new_tokens=8)
    monkeypatch.undo()
    assert _in_thread(lambda: tiny_chat_model.generate(CHAT, max_new_tokens=8).text) == expected
