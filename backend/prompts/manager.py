"""The Manager's prompts: the question type (when the wording does not say) and past research as
the memory methods show it (contrastive memories to the Planner, cases, notes to the Executor)."""

from __future__ import annotations

import re

CLASSIFY_SYSTEM = "You classify questions by what they ask for."
CLASSIFY_TURN = "Question: {question}\nWhich type is it? Options: {types}."

CAPTION_TURN = "Describe this image in one short sentence."
# Text read from the question's image joins its caption, labelled as OCR (data, as retrieved text is).
OCR_CAPTION = "{caption} (text in the image, by OCR: {text})"
OCR_ONLY_CAPTION = "Text in the image, by OCR: {text}"
OCR_MAX_CHARS = 400


# An image index match as a caption: a claim, with where it comes from.
LOOKS_LIKE = "looks like: {title} (image index, similarity {similarity:.2f})"
IMAGE_TEXT_TITLE = "Text in the question's image (OCR)"
IMAGE_TEXT_SOURCE = "image-ocr"  # the source of the passage OCR read in the question's own image
IMAGE_TEXT_MAX_CHARS = 4000


def image_text_passage(text: str) -> dict:
    """What OCR read in the question's image as a retrieved passage (backend.tools.base.Passage's fields):
    evidence an answer can rest on and cite; the caption the Planner reads holds its first 400 characters."""
    return {"title": IMAGE_TEXT_TITLE, "text": " ".join(text.split())[:IMAGE_TEXT_MAX_CHARS], "source": IMAGE_TEXT_SOURCE,
            "score": 1.0, "url": None}


def caption_with_ocr(caption: str | None, text: str) -> str:
    text = " ".join(text.split())[:OCR_MAX_CHARS]
    return OCR_CAPTION.format(caption=caption, text=text) if caption else OCR_ONLY_CAPTION.format(text=text)


def classify_messages(question: str, types: tuple[str, ...]) -> list[dict]:
    return [
        {"role": "system", "content": CLASSIFY_SYSTEM},
        {"role": "user", "content": CLASSIFY_TURN.format(question=question, types=", ".join(types))},
    ]


def caption_messages(image: str) -> list[dict]:
    return [{"role": "user", "content": CAPTION_TURN, "image": image}]


# A memory of another question of the same type, shown by how it was researched, without its names.
STRATEGY_LINE = "({verdict}) An earlier {kind} question, names left out: {strategy}"
MEMORY_LINE = "({verdict}) Q: {question}{caption} How: {how}"
CAPTION_PART = " Image: {caption}."
# What a person taught, first in its memory: the answer, and where a source states it.
TAUGHT_PART = "A person gave the right answer: {answer}."
TAUGHT_EVIDENCE_PART = " A source states it: {title}: \"{sentence}\" (found by searching '{query}')."
# The parts of a workflow summary (backend.manager.workflow_summary) that carry the answer: kept whole.
_ANSWER_PARTS = re.compile(r"The answer rests on: |Answered '|No answer was given\.")


def memory_shown(item: dict, max_chars: int = 400) -> str:
    """One memory as the Planner reads it (and the trace shows it). What carries the answer is never
    cut: a person's answer with its source, the sentence the answer rested on and the outcome; only
    the list of searches before them is shortened to fit `max_chars`."""
    verdict = "correct" if item.get("correct") else "incorrect"
    if not item.get("verified", True):
        verdict += ", unverified"
    if item.get("strategy"):
        return STRATEGY_LINE.format(verdict=verdict, kind=item.get("question_type") or "other",
                                    strategy=item["strategy"][:max_chars])
    taught = item.get("taught")
    kept = ""
    if taught:
        kept = TAUGHT_PART.format(answer=taught["answer"])
        evidence = taught.get("evidence")
        if evidence:
            kept += TAUGHT_EVIDENCE_PART.format(**evidence)
    summary = " ".join((item.get("summary") or "").split())
    answer_part = _ANSWER_PARTS.search(summary)
    searches, outcome = (summary[:answer_part.start()].strip(), summary[answer_part.start():]) if answer_part else (summary, "")
    kept = " ".join(part for part in (outcome, kept) if part)
    room = max(0, max_chars - len(kept))
    if len(searches) > room:
        searches = searches[:max(0, room - 1)].rstrip() + "…" if room > 1 else ""
    how = " ".join(part for part in (searches, kept) if part)
    caption = CAPTION_PART.format(caption=item["caption"]) if item.get("caption") else ""
    return MEMORY_LINE.format(verdict=verdict, question=item.get("question", ""), caption=caption, how=how)


def format_memories(successful: list[dict], failed: list[dict], max_chars: int = 400) -> str:
    """Contrastive memories for the Planner: strategies that worked, then lessons from failures, each
    as memory_shown gives it. A memory that carries a `strategy` (one of the question's type, below
    the relevance floor) is shown by it alone."""

    def block(title: str, items: list[dict]) -> str:
        if not items:
            return f"{title}: none found."
        return "\n".join([f"{title}:"] + [f"{i}. {memory_shown(item, max_chars)}" for i, item in enumerate(items, 1)])

    return block("Successful strategies", successful) + "\n" + block("Failure lessons", failed)


def format_cases(cases: list[dict], max_chars: int = 300) -> str:
    """Past cases as the memento baseline shows them to the Planner: each earlier question with the
    plan that was followed and whether its answer was right (plans, not workflow summaries)."""
    if not cases:
        return "Past cases: none found."
    lines = ["Past cases (question, plan followed, outcome):"]
    for i, case in enumerate(cases, 1):
        outcome = "right answer" if case.get("correct") else "wrong answer"
        plan = " ".join((case.get("plan") or "").split())[:max_chars]
        lines.append(f"{i}. Q: {case.get('question', '')} Plan: {plan or '(none)'} Outcome: {outcome}")
    return "\n".join(lines)


def past_research_notes(memories: list[dict], *, raw: bool, max_chars: int = 700) -> str:
    """Memories as Executor context for the rag (raw trajectories) and trace (summaries) baselines."""
    lines = []
    for m in memories:
        verdict = "correct" if m["correct"] else "incorrect"
        body = m.get("trajectory") if raw else m.get("summary")
        lines.append(f"- ({verdict}) Q: {m['question']}\n  {(body or m.get('summary') or '')[:max_chars]}")
    return "\n".join(lines)
