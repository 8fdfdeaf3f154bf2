"""Which patterns could match a text at all, decided by a substring check before any regex runs.

The detectors hold a few hundred regexes. Each one, run over a text of the maximum size, costs a
fraction of a millisecond even when it cannot possibly match, because the engine tries every position;
together that was most of a screening's time on adversarial shapes (a run of "a." at 4,096 characters:
~50 ms of `assess`, ~15 ms of the secret plugins). Almost every pattern needs some literal word to match
("ignore", "password", "AKIA"), so a text that holds none of a pattern's words can skip it.

The words are not written by hand: `required_literals` reads them off the pattern's own syntax tree
(Python's regular-expression parser), the way code-search engines derive trigram filters. For a
pattern it returns a set of strings such that every match contains at least one of them, or None when
it cannot tell (then the pattern always runs). So the prefilter can only skip work, never a match: a
pattern skipped is a pattern that could not have matched. Case is folded on both sides (`fold`), so
case-sensitive and case-insensitive patterns are filtered alike.

Cost: one case fold of the text and one substring test per distinct word, shared by every pattern of a
detector (`Prefilter.possible`); linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

_EQUIVALENT = str.maketrans(
    {
        "\u0130": "i",  # İ: its lower() is two characters ("i" + a combining dot)
        "\u0131": "i",  # ı: case-insensitively equal to I
        "\u017f": "s",  # ſ: case-insensitively equal to S
        "\u03a3": "\u03c3",  # Σ: lower() picks ς or σ by context
        "\u03c2": "\u03c3",  # ς
        "\u1e9b": "\u1e61",  # ẛ
        "\u1e9e": "\u00df",  # ẞ
        "\u00b5": "\u03bc",  # µ
        "\u0345": "\u03b9",
        "\u03d0": "\u03b2",
        "\u03d1": "\u03b8",
        "\u03d5": "\u03c6",
        "\u03d6": "\u03c0",
        "\u03f0": "\u03ba",
        "\u03f1": "\u03c1",
        "\u03f5": "\u03b5",
        "\u1fbe": "\u03b9",
        # Cyrillic small letter variants (U+1C80-1C88): case-insensitively equal to the ordinary letters
        **dict(zip("\u1c80\u1c81\u1c82\u1c83\u1c84\u1c85\u1c86\u1c87\u1c88", "вдостт\u044a\u0463\ua64b", strict=True)),
        "\U0001df95": "\u00df",  # a Latin ß variant the `regex` module's newer Unicode data equates with ß
    }
)
"""Characters that a case-insensitive regex equates with another character that `str.lower` does not
map them to (tested against both regex engines for every character a prefilter word holds)."""

MAX_STRINGS = 64
"""Largest set of alternatives followed exactly; beyond it a part of a pattern gives no words."""


def fold(text: str) -> str:
    """The case-folded text both the words and the texts are compared in."""
    return text.translate(_EQUIVALENT).lower()


@lru_cache(maxsize=16)
def _folded(text: str) -> str:
    return fold(text)


_Words = frozenset[str]
"""Strings one of which a match contains (case-folded, none empty)."""
_Info = tuple[frozenset[str] | None, tuple[_Words, ...]]
"""(exact, required) for a part of a pattern: every string the part can match, when that is a small set;
and sets of strings such that a match of the part contains a string of each set."""

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}
_ZERO_WIDTH = {sre.AT, sre.ASSERT, sre.ASSERT_NOT}
MAX_SETS = 4
"""Sets kept per pattern (the most selective): each costs a set test per candidate text."""


def _usable(words: frozenset[str] | None) -> bool:
    return bool(words) and all(words)  # type: ignore[arg-type]


def _rank(words: _Words) -> tuple[int, int]:
    """Selectivity: longest shortest string, then fewest strings."""
    return min(map(len, words)), -len(words)


def _best(*candidates: frozenset[str] | None) -> _Words | None:
    """The most selective usable set."""
    usable = [c for c in candidates if c is not None and _usable(c)]
    return max(usable, key=_rank) if usable else None


def _minimal(words: _Words) -> _Words:
    """The same condition with fewer strings: a string holding another of the set adds nothing."""
    ordered = sorted(words, key=len)
    kept: list[str] = []
    for w in ordered:
        if not any(k in w for k in kept):
            kept.append(w)
    return frozenset(kept)


def _implies(strong: _Words, weak: _Words) -> bool:
    """Every string of `strong` holds a string of `weak`: where `strong` is met, so is `weak`."""
    return all(any(w in s for w in weak) for s in strong)


def _strongest(sets: Iterable[_Words]) -> tuple[_Words, ...]:
    kept: list[_Words] = []
    for words in sorted({_minimal(s) for s in sets}, key=_rank, reverse=True):
        if not any(_implies(k, words) for k in kept):
            kept.append(words)
    return tuple(kept[:MAX_SETS])


def _char_class(items: Sequence[tuple[object, object]]) -> frozenset[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(fold(chr(av)))  # type: ignore[arg-type]
        elif op is sre.RANGE and av[1] - av[0] < 10:  # type: ignore[index,operator]
            chars.update(fold(chr(c)) for c in range(av[0], av[1] + 1))  # type: ignore[index,operator]
        else:
            return None  # a negation, a category (\w, \s) or a wide range: anything, as far as words go
    return frozenset(chars) if len(chars) <= 16 else None


def _node(op: object, av: object) -> _Info:
    if op is sre.LITERAL:
        return frozenset({fold(chr(av))}), ()  # type: ignore[arg-type]
    if op in _ZERO_WIDTH:
        return frozenset({""}), ()  # matches no text (a lookaround's text is outside the match): no words
    if op is sre.IN:
        return _char_class(av), ()  # type: ignore[arg-type]
    if op is sre.SUBPATTERN:
        return _sequence(av[3])  # type: ignore[index]
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return _sequence(av)  # type: ignore[arg-type]
    if op is sre.BRANCH:
        branches = [_sequence(b) for b in av[1]]  # type: ignore[index]
        exacts = [e for e, _ in branches]
        exact = None
        if all(e is not None for e in exacts):
            union = frozenset().union(*exacts)  # type: ignore[arg-type]
            exact = union if len(union) <= MAX_STRINGS else None
        # A match is a match of one branch: it holds a word of that branch's best set.
        per_branch = [_best(e, *r) for e, r in branches]
        if any(b is None for b in per_branch):
            return exact, ()
        return exact, (frozenset().union(*per_branch),)  # type: ignore[arg-type]
    if op in _REPEATS:
        low, high, sub = av  # type: ignore[misc]
        exact, required = _sequence(sub)
        if low == 0:
            if high == 1 and exact is not None:
                return exact | {""}, ()
            return None, ()
        if low == high == 1:
            return exact, required
        own = (exact,) if exact is not None and _usable(exact) else ()
        return None, _strongest((*required, *own))
    return None, ()  # any character, a back-reference, a conditional: no words


def _sequence(items: Iterable[tuple[object, object]]) -> _Info:
    required: list[_Words] = []
    run: frozenset[str] = frozenset({""})
    whole = True

    def close(words: frozenset[str]) -> None:
        if _usable(words):
            required.append(words)

    for op, av in items:
        exact, needs = _node(op, av)
        required.extend(needs)
        if exact is not None and len(run) * len(exact) <= MAX_STRINGS:
            run = frozenset(a + b for a in run for b in exact)
            continue
        whole = False
        close(run)
        run = exact if exact is not None else frozenset({""})
    close(run)
    return (run if whole else None), _strongest(required)


@lru_cache(maxsize=4096)
def required_literals(pattern: str, verbose: bool = False) -> tuple[_Words, ...] | None:
    """Sets of strings (case-folded) such that every match of `pattern` holds a string of each set; None
    when no set is known. A pattern the standard parser does not read (syntax only `regex` has) gives None.
    """
    try:
        parsed = sre_parse.parse(pattern, re.VERBOSE if verbose else 0)
    except (re.error, ValueError, TypeError, OverflowError, RecursionError):
        return None
    _, required = _sequence(parsed.data)
    return required or None


def pattern_literals(pattern: object) -> tuple[_Words, ...] | None:
    """`required_literals` of a compiled pattern (either engine), reading its source and verbose flag."""
    source = getattr(pattern, "pattern", None)
    flags = getattr(pattern, "flags", 0)
    if not isinstance(source, str):
        return None
    return required_literals(source, bool(flags & re.VERBOSE))


def any_of(alternatives: Iterable[tuple[_Words, ...] | None]) -> tuple[_Words, ...] | None:
    """Words for a detector made of several patterns, any of which may match: None if any is unknown."""
    out: set[str] = set()
    for required in alternatives:
        best = _best(*required) if required else None
        if best is None:
            return None
        out |= best
    return (frozenset(out),) if out else None


GRAM = 3
"""Length of the substrings a text is indexed by (`Prefilter.present`)."""


@lru_cache(maxsize=16)
def grams(text: str) -> frozenset[str]:
    """Every substring of `GRAM` characters of `text` (kept for the last few texts: the detectors of one
    screening index the same normalised view)."""
    return frozenset(map("".join, zip(*(text[i:] for i in range(GRAM)), strict=False)))


class Prefilter:
    """One pass for a family of patterns: which of them could match a given text.

    The text is indexed once by its substrings of three characters; a word counts as present when every
    three-character piece of it is (a word shorter than that is looked up in the text itself). That can
    call a word present when it is not (its pieces occur apart), never the other way: more patterns run,
    none is skipped that could match.
    """

    __slots__ = ("_by_gram", "_required", "_short")

    def __init__(self, required: Sequence[tuple[_Words, ...] | None]) -> None:
        self._required = tuple(required)
        words: set[str] = set()
        for sets in self._required:
            for s in sets or ():
                words |= s
        self._short = tuple(sorted(w for w in words if len(w) < GRAM))
        by_gram: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for w in sorted(words):
            if len(w) >= GRAM:
                by_gram.setdefault(w[:GRAM], []).append((w, grams(w)))
        self._by_gram = {g: tuple(ws) for g, ws in by_gram.items()}
        """Words by their first piece: only words whose first piece the text holds are looked at."""

    @property
    def anchors(self) -> tuple[str, ...]:
        return (*self._short, *(w for ws in self._by_gram.values() for w, _ in ws))

    def present(self, text: str) -> frozenset[str]:
        """The words of this family that `text` may hold (case-folded): a superset of those it holds."""
        folded = _folded(text)
        pieces = grams(folded)
        found = [w for w in self._short if w in folded]
        for first in self._by_gram.keys() & pieces:
            found.extend(w for w, need in self._by_gram[first] if need <= pieces)
        return frozenset(found)

    def possible(self, text: str) -> tuple[bool, ...]:
        """Per pattern, in order: could it match `text`? False means it certainly cannot."""
        present = self.present(text)
        return tuple(sets is None or all(not present.isdisjoint(s) for s in sets) for sets in self._required)
