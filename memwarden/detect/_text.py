"""Text normalisation shared by every detector: the view a regex matches on.

Attackers hide text from people but not from models: zero-width and other invisible characters
inside words, full-width and mathematical letters, Cyrillic or Greek look-alikes, small capitals,
combining marks piled on letters, Unicode "tag" characters (invisible ASCII). Every detector matches
on `normalise(text)` so those tricks do not also hide the text from us.

Where the data comes from (no hand-written list of a few characters):
- invisible characters: the Unicode properties Default_Ignorable_Code_Point and Variation_Selector,
  as the `regex` module ships them (it tracks the current Unicode release);
- look-alikes: the Unicode confusables data (UTS #39 `confusables.txt`, as `confusable_homoglyphs`
  ships it), plus the Latin letters the Unicode character names spell out ("LATIN LETTER SMALL CAPITAL
  R", "LATIN SMALL LETTER O WITH STROKE"), which the confusables data leaves as prototypes of their own.

Why not the UTS #39 skeleton as is: it maps to prototypes chosen for comparing two strings ("I" and
"1" both become "l", "m" becomes "rn"), while the detectors are written against ordinary Latin text.
So each character is folded to the ASCII character its prototype stands for, in the character's own
case ("І", Cyrillic capital, becomes "I"), and only inside words that are already partly Latin or that
fold to ASCII entirely: a Russian word keeps its Cyrillic letters, so rules written in Russian still match.

Everything here is linear in the length of the text: translations, single-pass substitutions whose
patterns cannot backtrack, and one Python step per word that holds a non-ASCII character.
"""

from __future__ import annotations

import json
import time
import unicodedata
from functools import lru_cache
from importlib import resources

import regex

_IGNORABLE_CLASS = r"[\p{Default_Ignorable_Code_Point}\p{Variation_Selector}]"
_IGNORABLE = regex.compile(_IGNORABLE_CLASS + "+")
"""Invisible characters: zero-width spaces and joiners, bidi controls, fillers (U+3164, U+115F),
variation selectors (U+FE00-FE0F, U+E0100-E01EF, Mongolian U+180B-180F), tag characters (U+E0000-E007F)."""

_TAG_RE = regex.compile("[\U000e0000-\U000e007f]+")
_FLAG_TAGS = regex.compile("[\U000e0020-\U000e007e]+\U000e007f")
"""Subdivision flags (e.g. Scotland) legitimately use tag characters after U+1F3F4 and end with CANCEL TAG."""
_FLAG_TAG_RE = regex.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f")

_EMOJI = regex.compile(r"[\p{Emoji}\p{Emoji_Modifier}\p{Regional_Indicator}]")
_PICTOGRAPH = regex.compile(r"\p{Extended_Pictographic}")
_ZWJ = "\u200d"
_PRESENTATION = "\ufe0e\ufe0f"
_BLACK_FLAG = "\U0001f3f4"

_LATIN_MARKS = regex.compile(r"(?<=[A-Za-z])\p{Mn}+")
"""Combining marks on a Latin letter: accents ("é" -> "e") and stacked "Zalgo" marks alike."""
_WORD = regex.compile(r"[\w\p{M}]+")
_VERTICAL = str.maketrans({c: "\n" for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})
_HSPACE = regex.compile(r"[^\S\n]+")
_NEWLINES = regex.compile(r" ?\n[\n ]*")
"""A run of blank lines (and the spaces around them) is one newline: no rule can then walk a long run."""

_NAMED_LATIN = regex.compile(
    r"^(?:LATIN (?:LETTER SMALL CAPITAL|SMALL CAPITAL LETTER|SUBSCRIPT SMALL LETTER|(?:SMALL|CAPITAL) LETTER"
    r"(?: DOTLESS)?)|MODIFIER LETTER (?:SMALL|CAPITAL)|(?:NEGATIVE )?(?:CIRCLED|SQUARED|PARENTHESIZED) LATIN"
    r" (?:SMALL|CAPITAL) LETTER) ([A-Z])(?: WITH [A-Z -]+)?$"
)
"""Unicode names that spell out a Latin letter: small capitals, modifier letters, enclosed and barred letters."""

_SCAN_RANGES = ((0x80, 0x3400), (0xA640, 0xAB70), (0xFB00, 0xFFF0), (0x10400, 0x10800), (0x1D400, 0x1F200))
"""Where the letters `_NAMED_LATIN` can name live (Latin, IPA, phonetic extensions, letterlike, enclosed forms)."""


def _case_like(source: str, target: str, groups: dict[str, str]) -> str:
    """`target` (one ASCII character) in the case of `source`: a capital folds to a capital."""
    group = groups.get(target, target)
    if source.isupper():
        pick = [c for c in group if c.isupper()]
    elif source.islower():
        pick = [c for c in group if c.islower()]
    elif unicodedata.category(source) == "Nd":
        pick = [c for c in group if c.isdigit()]
    else:
        pick = []
    if pick:
        return pick[0]
    if source.islower():
        return target.lower()
    return target.upper() if source.isupper() else target


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[int, str], dict[int, str]]:
    """(letters, punctuation): code point -> ASCII replacement, derived once from the Unicode data."""
    with resources.files("confusable_homoglyphs").joinpath("confusables.json").open(encoding="utf-8") as f:
        data: dict[str, list[dict[str, str]]] = json.load(f)

    def proto(ch: str) -> str | None:
        entries = data.get(ch)
        if not entries or len(entries) != 1:
            return None  # a prototype (it lists what looks like it), or unknown
        return entries[0]["c"].replace("\u200e", "").replace("\u200f", "")

    named: dict[str, str] = {}
    for lo, hi in _SCAN_RANGES:
        for cp in range(lo, hi):
            m = _NAMED_LATIN.match(unicodedata.name(chr(cp), ""))
            if m:
                named[chr(cp)] = m.group(1)

    # ASCII characters that share a prototype ("I", "l", "1", "|"): the case-aware choice picks among them.
    groups: dict[str, set[str]] = {}
    for a in map(chr, range(0x21, 0x7F)):
        p = proto(a)
        key = p if p is not None and len(p) == 1 and p.isascii() else a
        groups.setdefault(key, {key}).add(a)
    by_member = {m: "".join(sorted(g)) for g in groups.values() for m in g}

    def to_ascii(ch: str, depth: int = 0) -> str | None:
        if ch.isascii():
            return ch
        if ch in named:
            return named[ch]
        target = proto(ch)
        if target is None or depth >= 2:
            return None
        parts = [to_ascii(c, depth + 1) for c in target]
        if any(p is None for p in parts):
            return None
        return "".join(p for p in parts if p is not None)

    letters: dict[int, str] = {}
    punctuation: dict[int, str] = {}
    candidates = set(data) | set(named)
    for ch in candidates:
        if len(ch) != 1 or ch.isascii() or ch.isspace() or _IGNORABLE.fullmatch(ch):
            continue
        out = to_ascii(ch)
        if not out or out.isspace() or not out.strip():
            continue
        if ch in named:  # the name says which letter; the character's own category says which case
            out = out.lower() if unicodedata.category(ch) == "Ll" else out.upper()
        elif len(out) == 1:
            out = _case_like(ch, out, by_member)
        if ch.isalnum():
            if out.isalnum():
                letters[ord(ch)] = out
        elif len(out) == 1:
            punctuation[ord(ch)] = out  # symbols (enclosed letters, look-alike punctuation) fold anywhere
    return letters, punctuation


def _fold_word(word: str, letters: dict[int, str]) -> str:
    if word.isascii():
        return word
    folded = word.translate(letters)
    if folded.isascii() or any(c.isascii() and c.isalpha() for c in word):
        return folded  # a look-alike word, or a Latin word with look-alike letters in it
    return word  # another script's own word: left alone


def fold_confusables(text: str) -> str:
    """Look-alike letters and punctuation folded to the ASCII they imitate (words of other scripts kept)."""
    if text.isascii():
        return text
    letters, punctuation = _tables()
    text = text.translate(punctuation)
    return _WORD.sub(lambda m: _fold_word(m.group(0), letters), text)


def _kept_ignorables(text: str, start: int, end: int) -> str:
    """The part of an invisible run at text[start:end] that emoji need (joiners, presentation selectors, flag tags)."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    run = text[start:end]
    if before == _BLACK_FLAG and _FLAG_TAGS.fullmatch(run):
        return run
    if not before or not _EMOJI.match(before):
        return ""
    kept = []
    for i, c in enumerate(run):
        if c in _PRESENTATION and i == 0:
            kept.append(c)
        elif c == _ZWJ and after and _PICTOGRAPH.match(after) and (i == len(run) - 1):
            kept.append(c)
        else:
            return ""  # anything else in the run: not an emoji sequence, drop it all
    return "".join(kept)


def strip_invisible(text: str) -> str:
    """`text` without invisible characters: what a person sees.

    Emoji stay intact: a joiner between two pictographs, a presentation selector after an emoji, and a
    subdivision flag's tag characters are kept; every other default-ignorable character goes.
    """
    if text.isascii():
        return text
    out, pos = [], 0
    for m in _IGNORABLE.finditer(text):
        out.append(text[pos : m.start()])
        out.append(_kept_ignorables(text, m.start(), m.end()))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def smuggled_tags(text: str) -> str:
    """ASCII hidden as Unicode tag characters (outside emoji flag sequences), decoded; '' if none."""
    if "\U000e0000" > max(text, default="\0"):
        return ""
    cleaned = _FLAG_TAG_RE.sub("", text)
    out = []
    for run in _TAG_RE.findall(cleaned):
        out.append("".join(chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E))
    return " ".join(s for s in out if s.strip())


def count_invisible(text: str) -> int:
    """Invisible characters a person would not see, not counting emoji joiners or tag characters
    (`smuggled_tags` reports those)."""
    if text.isascii():
        return 0
    removed = len(text) - len(strip_invisible(text))
    tags = sum(len(r) for r in _TAG_RE.findall(_FLAG_TAG_RE.sub("", text)))
    return max(0, removed - tags)


def _collapse_space(text: str) -> str:
    return _NEWLINES.sub("\n", _HSPACE.sub(" ", text.translate(_VERTICAL)))


@lru_cache(maxsize=2048)
def normalise(text: str) -> str:
    """The view every detector matches on.

    NFKC (full-width and mathematical letters become ASCII), every default-ignorable and
    variation-selector character removed, combining marks on Latin letters dropped, look-alikes folded
    (see `fold_confusables`), runs of spaces one space and runs of blank lines one newline.
    """
    if text.isascii():
        return _collapse_space(text)
    view = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
    view = fold_confusables(unicodedata.normalize("NFD", view))
    view = unicodedata.normalize("NFC", _LATIN_MARKS.sub("", view))
    return _collapse_space(view)


@lru_cache(maxsize=256)
def normalise_spaced(text: str) -> str:
    """Like `normalise`, but each run of invisible characters reads as a space: "ignore<U+2060>previous"
    hides a word boundary, where "Ign<U+200B>ore" hides a word. Detectors look at both when text has any."""
    return normalise(_IGNORABLE.sub(" ", text))


def has_invisible(text: str) -> bool:
    """True when `text` holds any default-ignorable or variation-selector character."""
    return not text.isascii() and _IGNORABLE.search(text) is not None


def warm_up() -> None:
    """Build the look-alike tables now (~0.1 s), not on the first candidate with a non-ASCII letter."""
    _tables()
    normalise("warm up: Іgnore ɪɴsᴛʀᴜᴄᴛɪᴏɴs")


class DeadlineExceeded(Exception):
    """A detector ran past the screening's time budget. Carries the detector's name only."""

    def __init__(self, detector: str) -> None:
        super().__init__(f"detector {detector} passed its deadline")
        self.detector = detector


class Deadline:
    """A time budget shared by every detector of one screening, checked between and inside them.

    The budget counts the screening thread's CPU time (`time.thread_time`): that is what a hostile input
    can cost, and it does not run out while the thread merely waits for the GIL or a core (an index flush
    or a busy neighbour would otherwise turn a plain sentence into `detector_deadline`). A wall-clock cap,
    `WALL_CAP_FACTOR` times the budget and at least `MIN_WALL_CAP_S`, still bounds how long a stalled
    screening can hold a request.

    `remaining()` is what a `regex` call may still take (its `timeout`, which is wall time): a regex call
    holds the GIL, so its wall time is its CPU time but for the scheduler, and a single match cannot
    overrun the budget by more than the regex module's check interval; between steps, `check()` stops
    the screening as soon as either is spent.
    """

    __slots__ = ("_cpu_at", "_wall_at", "detector")

    def __init__(self, seconds: float) -> None:
        budget = max(0.0, seconds)
        self._cpu_at = time.thread_time() + budget
        self._wall_at = time.monotonic() + max(budget * WALL_CAP_FACTOR, MIN_WALL_CAP_S)
        self.detector = "screen"

    def remaining(self) -> float:
        """Seconds left; raises `DeadlineExceeded` (naming the running detector) once none are."""
        left = min(self._cpu_at - time.thread_time(), self._wall_at - time.monotonic())
        if left <= 0.0:
            raise DeadlineExceeded(self.detector)
        return left

    def check(self) -> None:
        self.remaining()


WALL_CAP_FACTOR = 10.0
"""A screening may take this many times its CPU budget in wall time, waiting included, before it is cut."""

MIN_WALL_CAP_S = 2.0
"""The wall-clock cap is never below this: a tiny budget still leaves room for one stall of the GIL."""


NO_DEADLINE_S = 3600.0
"""Budget of a call made without one (benches, tests): large enough never to fire."""
