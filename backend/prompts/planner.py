"""The Planner's prompts: the blueprint, the reflection (a constrained yes/no choice) and the
supplementary plan. Short on purpose: a small model loses long formats. Every plan is prefilled with
``1. Search for`` so that it starts as a numbered list with an action."""

from __future__ import annotations

from backend import protocol

PLANNER_SYSTEM = (
    "You are a research planner. Write a short numbered plan of 2 to 5 atomic steps "
    "(a search and what it is for, an inference, a cross-check, a synthesis) that an assistant "
    "with the listed tools can follow to answer the question. Never state facts or the answer."
)
PLAN_TURN = "Tools: {tools}\n\n{memories}\n\nQuestion: {question}{image_line}\n\nPlan:"
IMAGE_LINE = "\nImage: {caption}"
PLAN_PREFILL = "1. Search for"

REFLECT_SYSTEM = "You check research work."
REFLECT_TURN = "Question: {question}\nResearch so far:\n{trace}\nAnswer: {answer}{evidence}\n\n{ask}"
REFLECT_QUESTION = (
    "Does the research so far support this answer well enough to trust it? "
    "Say no if evidence is missing or the answer is incomplete. Reply yes or no."
)
REFLECT_OPTIONS = ("yes", "no")
# Asked this way round, a model's leaning towards "yes" keeps a supported answer instead of paying for
# a second round of research (measured on `train`: asked "is more research needed?", Qwen-1.5B said
# yes after answers the results stated).
REPLAN_WHEN = "no"
SUPPORT_STATED = "\nWhere the results state it (retrieved data): {support}"
SUPPORT_MISSING = "\nThe retrieved text does not state this answer."

REPLAN_SYSTEM = (
    "You are a research planner reviewing an assistant's work. Write a short numbered "
    "supplementary plan (at most 3 steps) that fixes what is missing. Never state the answer."
)
REPLAN_TURN = (
    "Question: {question}\nSteps already done:\n{done}\nFindings:\n{trace}\n"
    "Current answer: {answer}\n\nSupplementary plan:"
)
NOTHING_DONE = "- (nothing)"
NO_ANSWER = "(none)"

# A plan of sub-questions (agent.plan_shape = "subquestions", backend.hops). The examples are not from
# the evaluation's questions; worked examples from memory come before them.
DECOMPOSE_SYSTEM = (
    "You break a question into the simple questions that answer it, in order. Each simple question asks "
    "for one fact that one search can find. Refer to the answer of an earlier one as #1 or #2. Write 1 to 3 "
    "numbered questions. Never answer them."
)
DECOMPOSE_EXAMPLES = (
    ("Which river flows through the city where the author of Dracula was born?",
     ("Who wrote Dracula?", "In which city was #1 born?", "Which river flows through #2?")),
    ("Who was born first, Ada Lovelace or Charles Babbage?",
     ("When was Ada Lovelace born?", "When was Charles Babbage born?")),
    ("What instrument did the founder of the Vienna Philharmonic play?",
     ("Who founded the Vienna Philharmonic?", "What instrument did #1 play?")),
)
DECOMPOSE_EXAMPLE = "Question: {question}\n{subquestions}"
WORKED_EXAMPLE_NOTE = "(worked for an earlier question: {outcome})"
DECOMPOSE_ASK = "Question: {question}"
# Asked again when the question researched as one hop was answered with nothing a retrieved text states.
DECOMPOSE_AGAIN = ("\nSearching the whole question found no text stating an answer ({answer!r}). "
                   "Break it into 2 or 3 simple questions.")
DECOMPOSE_PREFILL = "1."

FALLBACK_PLAN_STEP = "Search for the main entities of: {question}"
FALLBACK_REPLAN_STEP = "Search again with different keywords for: {question}"


def plan_messages(question: str, memories_text: str, tools_text: str, caption: str | None = None) -> list[dict]:
    image_line = IMAGE_LINE.format(caption=caption) if caption else ""
    return [
        {"role": "system", "content": PLANNER_SYSTEM},
        {"role": "user", "content": PLAN_TURN.format(tools=tools_text, memories=memories_text, question=question,
                                                     image_line=image_line)},
    ]


def decomposition_text(subquestions) -> str:
    return "\n".join(f"{i}. {sub}" for i, sub in enumerate(subquestions, 1))


def worked_examples_text(worked: list[tuple[str, list[str], str]]) -> str:
    """Verified decompositions from memory, (question, sub-questions, outcome) each, as the Planner is
    shown them before its fixed examples: raw, as they were solved."""
    return "\n\n".join(DECOMPOSE_EXAMPLE.format(question=q, subquestions=decomposition_text(subs)) + "\n"
                       + WORKED_EXAMPLE_NOTE.format(outcome=outcome) for q, subs, outcome in worked)


def decompose_messages(question: str, worked_text: str = "", caption: str | None = None,
                       unstated: str | None = None) -> list[dict]:
    """The fixed examples as earlier turns of the conversation (a small model copies examples it reads
    inside the question's own turn); `worked_text`, worked examples from memory (worked_examples_text),
    opens the question's turn; `unstated`, the answer researching the whole question found and no
    retrieved text states, asks for hops instead."""
    messages = [{"role": "system", "content": DECOMPOSE_SYSTEM}]
    for example, subquestions in DECOMPOSE_EXAMPLES:
        messages += [{"role": "user", "content": DECOMPOSE_ASK.format(question=example)},
                     {"role": "assistant", "content": decomposition_text(subquestions)}]
    image_line = IMAGE_LINE.format(caption=caption) if caption else ""
    ask = DECOMPOSE_ASK.format(question=question) + image_line
    if unstated is not None:
        ask += DECOMPOSE_AGAIN.format(answer=unstated)
    return messages + [{"role": "user", "content": f"{worked_text}\n\n{ask}" if worked_text else ask}]


def reflect_messages(question: str, answer: str, trace_text: str, support: str | None) -> list[dict]:
    """`support`: the retrieved sentence stating the answer ("" = none does; None = not checked)."""
    if support is None:
        evidence = ""
    elif support:
        evidence = SUPPORT_STATED.format(support=protocol.neutralise(support))
    else:
        evidence = SUPPORT_MISSING
    return [
        {"role": "system", "content": REFLECT_SYSTEM},
        {"role": "user", "content": REFLECT_TURN.format(question=question, trace=trace_text, answer=answer or NO_ANSWER,
                                                        evidence=evidence, ask=REFLECT_QUESTION)},
    ]


def replan_messages(question: str, answer: str, trace_text: str, steps_done: list[str]) -> list[dict]:
    done = "\n".join(f"- {s}" for s in steps_done) or NOTHING_DONE
    return [
        {"role": "system", "content": REPLAN_SYSTEM},
        {"role": "user", "content": REPLAN_TURN.format(question=question, done=done, trace=trace_text,
                                                       answer=answer or NO_ANSWER)},
    ]


# A follow-up read with its thread (backend.follow_up): what one of its words ("she", "it", "this film")
# stands for, chosen among the earlier answer and what the earlier question named, by log-probability.
REFERENT_SYSTEM = "You read a follow-up question in a conversation and say what one of its words refers to."
REFERENT_TURN = ("Earlier question: {question}\nIts answer: {answer}\nFollow-up question: {follow_up}\n\n"
                 "In the follow-up, what does \"{word}\" refer to? One of: {options}.")
REFERENT_PREFILL = "It refers to:"


def referent_messages(question: str, answer: str, follow_up: str, word: str, options: list[str]) -> list[dict]:
    return [
        {"role": "system", "content": REFERENT_SYSTEM},
        {"role": "user", "content": REFERENT_TURN.format(question=question, answer=answer or NO_ANSWER,
                                                         follow_up=follow_up, word=word, options="; ".join(options))},
    ]
