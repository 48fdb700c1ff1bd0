"""Whether a person's correction answers only its own question: the recall path of backend.taught
(MiniLM similarity, then the name and word test; no LLM) on a real memory store with many corrections.

Each question is taught as the app teaches it: its run's memory is stored (merged into a near-duplicate
as the store merges), then a typed right answer is recorded on that memory as feedback records it.

  flood      the 500 `train` and `train-extra` questions taught with their gold answers in one
             namespace, with the 100 `dev` questions that have hand-written rewordings; then asked:
             50 sampled other `dev` questions, taught questions with a number changed (1972 -> 1973),
             the 31 `train` near-misses (the same things, another question) and the 160 rewordings
  templated  500 of 809 questions from five templates that differ in one name or number ("Super Bowl
             {roman}", "the {year} Tour de France", "{city} in {year}", ...) taught in one namespace;
             a sample asked again, and the untaught rest
  pairs      hand-written pairs that differ in one name or number ("Super Bowl XLIX" / "XLVIII"), in one
             namespace: the second asked before it is taught, then each after both are taught

"borrowed" counts answers recalled from another question's correction (target 0); "similar" counts
questions with a taught question above the cosine threshold, what cosine alone would have recalled;
"near miss named" counts those researched with the similar taught question named in the trace.

    .venv/bin/python benchmarks/taught_recall_bench.py
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.feedback import VERIFIED_BY_FEEDBACK  # noqa: E402
from backend.taught import TYPED, recall, taught_fields  # noqa: E402
from memory_db import MemoryStore, NewMemory, get_embedder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REWORDINGS = ROOT / "benchmarks" / "rewordings"
PAIRS = [  # (question, its answer, the other question, its answer)
    ("What was the final score of Super Bowl XLIX?", "28-24", "What was the final score of Super Bowl XLVIII?", "43-8"),
    ("Which countries fought on the Allied side in World War I?", "France, Russia, the UK",
     "Which countries fought on the Allied side in World War II?", "the UK, the USSR, the US"),
    ("Who was the third wife of Henry VIII?", "Jane Seymour", "Who was the wife of Henry VII?", "Elizabeth of York"),
    ("Who succeeded Louis XIV as King of France?", "Louis XV", "Who succeeded Louis XVI as King of France?", "Napoleon"),
    ("Which country hosted the 2014 FIFA World Cup?", "Brazil", "Which country hosted the 2010 FIFA World Cup?",
     "South Africa"),
    ("Who was the commander of Apollo 11?", "Neil Armstrong", "Who was the commander of Apollo 13?", "Jim Lovell"),
    ("Who won the 1998 Tour de France?", "Marco Pantani", "Who won the 1999 Tour de France?", "no winner"),
    ("In which year was Pope John Paul II elected?", "1978", "In which year was Pope John Paul I elected?", "1978 (August)"),
    ("Who composed the music for Toy Story 2?", "Randy Newman", "Who composed the music for Toy Story 4?", "Randy Newman (4)"),
    ("When was Queen Elizabeth II crowned?", "2 June 1953", "When was Queen Elizabeth I crowned?", "15 January 1559"),
    ("Who is older, Carrie Akre or Shifty Shellshock?", "Carrie Akre", "Who is older, Carrie Akre or Beck?", "Carrie Akre (Beck)"),
    ("Where was Barack Obama born?", "Honolulu", "Where was Michelle Obama born?", "Chicago"),
    ("Who directed Rocky III?", "Sylvester Stallone", "Who directed Rocky V?", "John G. Avildsen"),
    ("What was the population of Paris in 1900?", "2.7 million", "What was the population of Paris in 1950?", "2.9 million"),
]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def teach(store: MemoryStore, namespace: str, question: str, answer: str) -> None:
    """A run's memory stored, then the person's right answer recorded on it (backend.feedback's path)."""
    memory = store.add(NewMemory(question, f"Searched for {question}", "1. Search.", False, namespace=namespace,
                                 provenance={"origin": "research", "verdict_source": "judge"}))
    store.record_verdict(uuid.uuid4().hex, namespace=namespace, memory_id=memory.id, used_ids=[], correct=True,
                         count_outcome=True, actor=f"feedback:{namespace}",
                         provenance_update={**VERIFIED_BY_FEEDBACK, **taught_fields(
                             answer=answer, user=namespace, at=time.time(), how=TYPED, evidence=None)})


class Tally:
    def __init__(self, name: str):
        self.name, self.asked, self.similar, self.own, self.borrowed, self.near, self.ms = name, 0, 0, 0, 0, 0, []
        self.examples: list[str] = []

    def ask(self, store, namespace: str, question: str, own: str | None, threshold: float) -> None:
        """`own`: the answer taught for this question (or the one it rewords), None for an untaught one."""
        start = time.perf_counter()
        recalled = recall(store, question, namespace, min_similarity=threshold)
        self.ms.append(1000 * (time.perf_counter() - start))
        self.asked += 1
        self.similar += recalled.taught is not None or recalled.near is not None
        self.near += recalled.near is not None
        if recalled.taught is not None and recalled.taught.answer == own:
            self.own += 1
        elif recalled.taught is not None:
            self.borrowed += 1
            self.examples.append(f"{question!r} got {recalled.taught.answer!r} of {recalled.taught.question!r}")

    def row(self) -> str:
        return (f"| {self.name} | {self.asked} | {self.similar} | {self.own} | {self.borrowed} | {self.near} | "
                f"{statistics.median(self.ms):.0f} |")


def roman(n: int) -> str:
    out = ""
    for value, letters in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                           (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out, n = out + letters, n - value
    return out


def templated_questions() -> list[str]:
    """Questions that differ in one name or number, as many corrections of one kind would."""
    cities = ["Paris", "Berlin", "Madrid", "Rome", "Vienna", "Lisbon", "Prague", "Warsaw", "Dublin", "Oslo"]
    return ([f"What was the final score of Super Bowl {roman(n)}?" for n in range(1, 59)]
            + [f"Who won the {year} Tour de France?" for year in range(1950, 2020)]
            + [f"What was the population of {city} in {year}?" for city in cities for year in range(1900, 2020, 2)]
            + [f"Who won the Nobel Prize in Physics in {year}?" for year in range(1950, 2020)]
            + [f"Who was the commander of Apollo {n}?" for n in range(7, 18)])


def with_number_changed(question: str) -> str | None:
    match = re.search(r"\b\d{1,4}\b", question)
    return None if match is None else question[:match.start()] + str(int(match.group()) + 1) + question[match.end():]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=0.85, help="agent.taught_min_similarity")
    parser.add_argument("--others", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    data = ROOT / "data" / "hotpotqa"
    taught_rows = read_jsonl(data / "train.jsonl") + read_jsonl(data / "train-extra.jsonl")
    dev = read_jsonl(data / "dev.jsonl")
    rewordings = read_jsonl(REWORDINGS / "train.jsonl") + read_jsonl(REWORDINGS / "dev.jsonl")
    near_misses = read_jsonl(REWORDINGS / "train_near_misses.jsonl")
    embedder = get_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(f"sqlite:///{tmp}/memory.sqlite", embedder=embedder)  # the app's merge threshold
        started = time.perf_counter()
        taught = {r["question"]: r["answer"] for r in taught_rows}
        taught.update({r["original"]: r["answer"] for r in read_jsonl(REWORDINGS / "dev.jsonl")})
        for question, answer in taught.items():
            teach(store, "flood", question, answer)
        print(f"taught {len(taught)} questions in {time.perf_counter() - started:.0f} s: "
              f"{store.count(namespace='flood')} memories in the namespace")

        tallies = []
        others = Tally(f"flood: other `dev` questions (sample of {args.others})")
        for row in rng.sample([r for r in dev if r["question"] not in taught], args.others):
            others.ask(store, "flood", row["question"], None, args.threshold)
        variants = Tally("flood: a taught question, a number changed")
        changed = [v for r in taught_rows if (v := with_number_changed(r["question"])) and v not in taught]
        for question in rng.sample(changed, min(args.others, len(changed))):
            variants.ask(store, "flood", question, None, args.threshold)
        near = Tally("flood: `train` near-misses")
        for row in near_misses:
            near.ask(store, "flood", row["question"], None, args.threshold)
        reworded = Tally("flood: rewordings of taught questions")
        for row in rewordings:
            reworded.ask(store, "flood", row["question"], taught[row["original"]], args.threshold)
        tallies += [others, variants, near, reworded]

        templated = templated_questions()
        rng.shuffle(templated)
        answers = {question: f"answer {i}" for i, question in enumerate(templated[:500])}
        for question, answer in answers.items():
            teach(store, "templated", question, answer)
        again = Tally("templated: 500 taught, a sample asked again")
        for question in rng.sample(sorted(answers), args.others):
            again.ask(store, "templated", question, answers[question], args.threshold)
        untaught = Tally("templated: untaught questions of the same kinds")
        for question in templated[500:500 + args.others]:
            untaught.ask(store, "templated", question, None, args.threshold)
        tallies += [again, untaught]
        print(f"templated: {len(answers)} taught, {store.count(namespace='templated')} memories in the namespace")

        before = Tally("pairs: the other asked before it is taught")
        after = Tally("pairs: each asked after both are taught")
        for first, first_answer, second, _ in PAIRS:
            teach(store, "pairs", first, first_answer)
            before.ask(store, "pairs", second, None, args.threshold)
        for _, _, second, second_answer in PAIRS:
            teach(store, "pairs", second, second_answer)
        for first, first_answer, second, second_answer in PAIRS:
            after.ask(store, "pairs", first, first_answer, args.threshold)
            after.ask(store, "pairs", second, second_answer, args.threshold)
        tallies += [before, after]
        print(f"pairs: {len(PAIRS)} pairs, {store.count(namespace='pairs')} memories in the namespace")
        store.close()

    print(f"\ncosine threshold {args.threshold}; recall = the most similar taught memory that is a rewording\n")
    print("| asked | questions | similar taught question (cosine alone) | own answer recalled | borrowed | "
          "near miss named | recall ms (median) |")
    print("|---|---|---|---|---|---|---|")
    for tally in tallies:
        print(tally.row())
    print(f"\nrewordings recalled: {reworded.own}/{reworded.asked} ({100 * reworded.own / reworded.asked:.1f}%)")
    for tally in tallies:
        for example in tally.examples:
            print(f"borrowed ({tally.name}): {example}")


if __name__ == "__main__":
    main()
