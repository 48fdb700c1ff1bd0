"""Question streams for evaluation: HotpotQA JSONL or plain {"id", "question", "answer", "image"?,
"hide_titles"?} JSONL.

Both formats share the keys the harness needs, so one reader serves both; HotpotQA's extra keys
(context, supporting facts) are ignored: the agent must find the evidence with its own tools.
`hide_titles` names wiki articles the search leaves out for that question alone: evidence the
question gives another way (a scanned page of that article in its image) is not found by search.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


class DatasetError(ValueError):
    """A question file cannot be used; the message names the file, the line and what to fix."""


def json_lines(path: Path, not_json: Callable[[int, json.JSONDecodeError], Exception]) -> Iterator[tuple[int, object]]:
    """Each non-blank line of a JSONL file, parsed, with its number; a line that is not JSON raises
    what `not_json(line number, error)` makes (a message that names the file and what to fix)."""
    with Path(path).open(encoding="utf-8") as lines:
        for line_no, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as exc:
                raise not_json(line_no, exc) from None


@dataclass(frozen=True)
class EvalQuestion:
    id: str
    question: str
    answer: str
    image: str | None = None  # an absolute path; relative paths in the file are resolved beside it
    hidden_titles: tuple[str, ...] = ()  # wiki articles its search leaves out ("hide_titles")


def _text_field(record: dict, key: str, where: str) -> str:
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "id":
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: {key!r} must be a non-empty text; every line needs id, question and answer.")
    return value.strip()


def _question_from_record(record: object, path: Path, line_no: int) -> EvalQuestion:
    where = f"{path}, line {line_no}"
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object with id, question and answer.")
    image = record.get("image")
    if image is not None:
        if not isinstance(image, str) or not image.strip():
            raise DatasetError(f"{where}: 'image' must be a file path (or left out).")
        image_path = Path(image)
        if not image_path.is_absolute():
            image_path = path.parent / image_path
        if not image_path.is_file():
            raise DatasetError(f"{where}: the image {image_path} does not exist; fix the path or drop the key.")
        image = str(image_path)
    hidden = record.get("hide_titles", [])
    if not isinstance(hidden, list) or not all(isinstance(title, str) and title.strip() for title in hidden):
        raise DatasetError(f"{where}: 'hide_titles' must be a list of wiki article titles (or left out).")
    return EvalQuestion(
        id=_text_field(record, "id", where),
        question=_text_field(record, "question", where),
        answer=_text_field(record, "answer", where),
        image=image,
        hidden_titles=tuple(title.strip() for title in hidden),
    )


def load_questions(path: Path | str, *, limit: int | None = None, skip: int = 0) -> list[EvalQuestion]:
    """The first `limit` questions of the file (all when None) after the first `skip`, in file order."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise DatasetError(f"--limit must be at least 1, got {limit}.")
    if skip < 0:
        raise DatasetError(f"--skip must be 0 or more, got {skip}.")
    if not path.is_file():
        raise DatasetError(f"{path}: no such question file; give a JSONL file of questions.")
    questions: list[EvalQuestion] = []
    seen: dict[str, int] = {}
    records = json_lines(path, lambda line_no, exc: DatasetError(f"{path}, line {line_no}: not valid JSON ({exc.msg})."))
    for line_no, record in records:
        question = _question_from_record(record, path, line_no)
        if question.id in seen:
            raise DatasetError(
                f"{path}, line {line_no}: id {question.id!r} already used on line {seen[question.id]}; "
                "ids must be unique (results are resumed by id)."
            )
        seen[question.id] = line_no
        questions.append(question)
        if limit is not None and len(questions) >= skip + limit:
            break
    if len(questions) <= skip:
        raise DatasetError(f"{path}: the file holds {len(questions)} questions, none after the first {skip}." if skip
                           else f"{path}: the file holds no questions.")
    return questions[skip:]
