"""What a question names, and whether two questions name the same things.

A memory stands for another question only when both name the same things. "Super Bowl XLIX" and
"Super Bowl XLVIII" are as alike as a rewording to an embedding (MiniLM cosine 0.976) and ask about
different games, so the test is exact, not a similarity: each question's names (quoted titles and
capitalised names, numerals included) stand word for word in the other, and both hold the same
numbers. It needs no model: the store checks it before merging a near-duplicate, and a taught
answer is recalled only for a question that passes it (backend.taught).
"""

from __future__ import annotations

import re
import unicodedata

# Lower-case words a name may hold between capitalised ones ("Bank of America", "Ludwig van Beethoven").
_CONNECTORS = "of|for|the|de|von|van|la|le|du|da|del|der|y"
_NAME = re.compile(rf"[A-Z][\w'’.&-]*(?:\s+(?:(?:{_CONNECTORS})\s+)*[A-Z0-9][\w'’.&-]*)*")
_QUOTED = re.compile(r'"([^"]{2,80})"|“([^”]{2,80})”')
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
# Words capitalised because they open a question or a clause, not because they name something.
_OPENING = set("""which what who whom whose when where why how is are was were do does did can could has have had
will would should may might the a an of for and or in on at to by as with from into about after before during since
until between among both either neither this that these those it its there here name tell give identify find list
state according considering regarding if although while though despite unlike like besides apart except also out
""".split())
_ABBREVIATION = re.compile(r"\b(?:[A-Za-z]\.){2,}")


def _tokens(text: str) -> list[str]:
    """Lower-case words without accents, possessives or abbreviation dots ("U.S." -> "us")."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    folded = re.sub(r"(?<=\w)'s\b|(?<=s)'(?=\s|$)", "", folded.replace("’", "'"))
    folded = _ABBREVIATION.sub(lambda m: m.group().replace(".", ""), folded)
    return re.findall(r"[a-z0-9]+", folded)


def numbers(question: str) -> set[str]:
    """The numbers a question holds, written without thousands separators ("1,000" -> "1000",
    "21st" -> "21")."""
    return {n.replace(",", "") for n in _NUMBER.findall(question)}


def names(question: str) -> list[str]:
    """Quoted titles and capitalised names, as written, without the opening words a question
    capitalises ("Which Company" -> "Company") or numbers before them ("In 1970 Chandgi Ram"; numbers
    are compared on their own). A pair joined by "and", and a possessive and what it owns ("United
    States Army's Barracks"), are two names each."""
    found = [a or b for a, b in _QUOTED.findall(question)]
    outside = _QUOTED.sub('"', question)
    for match in _NAME.findall(outside):
        for part in re.split(r"\s+and\s+|(?<=['’]s)\s+", match):
            words = part.split()
            while words and (words[0].lower().strip("'’.") in _OPENING or _NUMBER.fullmatch(words[0].split("-")[0])):
                words = words[1:]
            if words:
                found.append(" ".join(words))
    return list(dict.fromkeys(found))


def _stands_in(name: str, tokens: list[str], *, first_word_optional: bool) -> bool:
    wanted = _tokens(name)
    if not wanted:
        return True
    candidates = [wanted, wanted[1:]] if first_word_optional and len(wanted) > 1 else [wanted]
    return any(any(tokens[i:i + len(c)] == c for i in range(len(tokens) - len(c) + 1)) for c in candidates)


def names_missing(question: str, other: str) -> list[str]:
    """The names and numbers of `question` that `other` does not hold, as written in `question`. A
    name must stand word for word in `other` (in any case: "Which Company ..." names the company
    "a company" is); a name opening the question may lack its first word there, which may be
    capitalised only because it opens the question ("Musician Tom Waits")."""
    tokens = _tokens(other)
    first = question.lstrip(' "“')
    missing = [name for name in names(question)
               if not _stands_in(name, tokens, first_word_optional=first.startswith(name))]
    return missing + sorted(numbers(question) - numbers(other))


def name_the_same_things(a: str, b: str) -> bool:
    """Whether each question's names and numbers stand in the other (see names_missing)."""
    return not names_missing(a, b) and not names_missing(b, a)
