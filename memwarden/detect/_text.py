"""Text normalisation shared by the detectors.

Attackers hide text from people but not from models: zero-width characters inside words,
full-width letters, Cyrillic look-alikes, Unicode "tag" characters (invisible ASCII). Every
detector matches on a normalised view so those tricks do not also hide the text from us.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

ZERO_WIDTH = "\u200b\u200c\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e"
"""Invisible format characters that have no business inside words (ZWJ U+200D is handled separately:
emoji sequences need it)."""

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Bidirectional overrides: reorder what a person sees versus what a model reads."""

_STRIP = {ord(c): None for c in ZERO_WIDTH + BIDI_CONTROLS}

# Cyrillic and Greek letters that render like Latin ones; folding them is harmless for English matching.
_HOMOGLYPHS = str.maketrans(
    {
        "а": "a",
        "е": "e",
        "о": "o",
        "р": "p",
        "с": "c",
        "у": "y",
        "х": "x",
        "і": "i",
        "ј": "j",
        "ѕ": "s",
        "ԁ": "d",
        "ɡ": "g",
        "А": "A",
        "В": "B",
        "Е": "E",
        "К": "K",
        "М": "M",
        "Н": "H",
        "О": "O",
        "Р": "P",
        "С": "C",
        "Т": "T",
        "Х": "X",
        "ο": "o",
        "α": "a",
        "ι": "i",
        "Ι": "I",
        "Ο": "O",
    }
)

_TAG_RE = re.compile("[\U000e0000-\U000e007f]+")
_FLAG_TAG_RE = re.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f")
"""Subdivision flags (e.g. Scotland) legitimately use tag characters after U+1F3F4 and end with CANCEL TAG."""

_WS_RE = re.compile(r"[ \t\f\v]+")


def strip_invisible(text: str) -> str:
    """`text` without zero-width, bidi-control and smuggled tag characters: what a person sees.

    Emoji stay intact: ZWJ sequences are untouched and subdivision flags keep their tag characters.
    """
    out, pos = [], 0
    for m in _FLAG_TAG_RE.finditer(text):
        out.append(_TAG_RE.sub("", text[pos : m.start()]).translate(_STRIP))
        out.append(m.group(0))
        pos = m.end()
    out.append(_TAG_RE.sub("", text[pos:]).translate(_STRIP))
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
    """Zero-width / bidi characters, not counting ZWJ inside emoji sequences."""
    return sum(1 for c in text if c in ZERO_WIDTH or c in BIDI_CONTROLS)


@lru_cache(maxsize=2048)
def normalise(text: str) -> str:
    """The view every regex runs on: NFKC, invisible characters removed, look-alikes folded, spaces collapsed."""
    folded = unicodedata.normalize("NFKC", text).translate(_STRIP).translate(_HOMOGLYPHS)
    folded = _TAG_RE.sub(" ", folded)
    return _WS_RE.sub(" ", folded)
