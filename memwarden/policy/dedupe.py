"""When a candidate says the same thing as a live memory: embedding similarity, vetoed by value changes.

Measured on `tests/data/dedupe_pairs.jsonl` with the default embedder (all-MiniLM-L6-v2 int8):
cosine similarity alone cannot tell a paraphrase from a changed value. "The user's team is migrating
from MySQL to PostgreSQL" and "... from PostgreSQL to MySQL" score 0.993; "... every Monday morning"
and "... every Friday morning" 0.976; many true paraphrases score lower. No cosine threshold reaches
precision 0.95 on that set. So a duplicate needs two things:

1. `cosine >= DEDUPE_THRESHOLD` (the meaning is close: paraphrases count, word overlap alone does not);
2. no `value_conflict(a, b)`: a cheap lexical veto for the changes embeddings blur: a negation added or
   removed, a different number or time, a one-span edit of an otherwise verbatim sentence
   (Monday -> Friday, vegetarian -> vegan, bought -> sold), an added qualifier (marathon -> half marathon),
   or the same words with their roles swapped (from MySQL to PostgreSQL).

Both favour precision. A false duplicate (NOOP) silently drops a real new fact, the worst outcome for a
memory service; a missed duplicate only stores a near-copy that retrieval tolerates and a later
consolidation can merge. The veto therefore also rejects some true paraphrases that are one-word
synonym edits ("completed" -> "finished"): it cannot tell a synonym from a new value, and errs safe.
The veto is English-only; for other languages it only catches numbers, and the threshold carries it.

Everything here is pure python (no numpy): `is_duplicate` and `cosine` may run inside a Temporal
workflow; `value_conflict` needs both texts, so the activity that finds the nearest neighbour computes
it and hands the workflow a boolean, never the text. A different embedding model needs a new
measurement (`bench/dedupe_eval.py`): the scale of cosine scores is model-specific.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

DEDUPE_THRESHOLD = 0.88
"""Cosine similarity at or above which a candidate may be the same memory (subject to `value_conflict`).

Chosen with `bench/dedupe_eval.py` on 280 labelled pairs (105 duplicates): no labelled non-duplicate is
called a duplicate above 0.86, plus a 0.02 margin. At 0.88 with the veto: precision 1.00, recall 0.25.
The last 65 pairs were written after the veto, before seeing its results on them: precision 1.00, recall 0.32.
Without the veto no threshold reaches precision 0.95 (the best is 0.59).
"""


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zeros (nothing to compare)."""
    if len(a) != len(b):
        raise ValueError(f"vector lengths differ: {len(a)} != {len(b)}")
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm_a = math.sqrt(math.fsum(x * x for x in a))
    norm_b = math.sqrt(math.fsum(y * y for y in b))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / (norm_a * norm_b)))


def is_duplicate(similarity: float, *, value_conflict: bool = False, threshold: float = DEDUPE_THRESHOLD) -> bool:
    """True when a neighbour is the same memory: close enough in meaning, and no value differs.

    The threshold itself counts as a duplicate. `value_conflict` is `value_conflict(candidate, neighbour)`
    computed where both texts are at hand; pass it whenever the texts can be compared.
    """
    return similarity >= threshold and not value_conflict


# --- the lexical veto -------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+(?:[':][a-z0-9]+)*")

_NEGATORS = frozenset(
    {"not", "no", "never", "without", "nor", "neither", "none", "nothing", "nobody", "nowhere"}
    | {"avoid", "avoids", "refuse", "refuses"}
)
"""Words that flip a statement; compared by parity, so "don't drink" and "avoid drinking" agree."""

_NEGATIVE_VERBS: dict[str, tuple[str, ...]] = {
    "dislike": ("not", "like"),
    "dislikes": ("not", "like"),
    "hate": ("not", "like"),
    "hates": ("not", "like"),
}
"""Read as their negated positive, so "I don't like X" and "I dislike X" are the same text."""

_NUMBER_WORDS: dict[str, str] = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS |= {
    w: str(i + 1) for i, w in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth".split())
}
_NUMBER_WORDS |= {"once": "1", "twice": "2", "thrice": "3", "half": "0.5", "dozen": "12", "single": "1"}

_CONTRACTIONS: dict[str, tuple[str, ...]] = {
    "can't": ("can", "not"),
    "cannot": ("can", "not"),
    "won't": ("will", "not"),
    "shan't": ("shall", "not"),
}
_SUFFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("n't", ("not",)),
    ("'m", ("am",)),
    ("'re", ("are",)),
    ("'ve", ("have",)),
    ("'ll", ("will",)),
    ("'d", ("would",)),
    ("'s", ()),
)

_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
"""Memories are about their owner: "I", "my" and "the user" name the same person."""

_ARTICLES = frozenset({"the", "a", "an"})
"""Dropped before comparing: "User prefers X" and "The user prefers X" are the same text."""

_PREPOSITIONS = frozenset(
    {"from", "to", "over", "than", "into", "onto", "for", "with", "at", "on", "in", "by", "before", "after"}
    | {"under", "above", "against", "instead", "via", "toward", "towards", "about", "of", "per"}
)
_DETERMINERS = frozenset({"this", "that", "these", "those", "every", "each", "some", "any", "all", "his", "her"})
_DETERMINERS |= frozenset({"their", "our", "your", "its"})
_FUNCTION_WORDS = (
    _PREPOSITIONS
    | _DETERMINERS
    | frozenset({"user", "we", "us", "you", "he", "she", "they", "them", "it", "is", "am", "are", "was", "were"})
    | frozenset({"be", "been", "being", "do", "does", "did", "have", "has", "had", "will", "would", "should"})
    | frozenset({"shall", "can", "could", "may", "might", "must", "and", "or", "but", "so", "as", "please", "also"})
    | frozenset({"very", "really", "just", "there", "here", "who", "which", "what", "when", "where", "get", "got"})
)
"""Words whose change alone does not make a different value."""

_NUMBER = re.compile(r"\d")
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")

EDIT_OVERLAP = 0.5
"""A pair is an *edit* (one text is the other with a few words changed) when at least this share of the
longer one's words are kept verbatim and in order; an edit that changes a content word is a new value."""


def _spelling(word: str) -> str:
    """British to American spelling, applied to both sides alike: colour/color, centre/center, organise/organize."""
    if len(word) <= 5 or _NUMBER.search(word):
        return word
    word = re.sub(r"our(?=(ite|ites|s|ed|ing|able)?$)", "or", word)
    word = re.sub(r"tre(s?)$", r"ter\1", word)
    return re.sub(r"is(e|es|ed|ing|ation|ations)$", r"iz\1", word)


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _normalise(text: str) -> list[str]:
    """Lower-case word tokens with contractions split, numbers as digits, articles dropped, one spelling."""
    out: list[str] = []
    for raw in _TOKEN.findall(text.lower().replace("\u2019", "'")):
        if raw in _CONTRACTIONS:
            out.extend(_CONTRACTIONS[raw])
            continue
        if raw in _NEGATIVE_VERBS:
            out.extend(_NEGATIVE_VERBS[raw])
            continue
        for suffix, expansion in _SUFFIXES:
            if raw.endswith(suffix) and len(raw) > len(suffix):
                raw = raw[: -len(suffix)]
                tail = expansion
                break
        else:
            tail = ()
        ordinal = _ORDINAL.fullmatch(raw)
        word = ordinal.group(1) if ordinal else _NUMBER_WORDS.get(raw, raw)
        if word in _FIRST_PERSON:
            word = "user"
        if word not in _ARTICLES:
            out.append(_singular(_spelling(word)))
        out.extend(tail)
    return out


def _is_number(token: str) -> bool:
    return bool(_NUMBER.search(token))


def _is_content(token: str) -> bool:
    return token not in _FUNCTION_WORDS and token not in _NEGATORS and not _is_number(token)


def _roles(tokens: list[str]) -> dict[str, str | None]:
    """For each content word, the preposition that governs it ("from" MySQL vs "to" MySQL), if any."""
    roles: dict[str, str | None] = {}
    for i, token in enumerate(tokens):
        if not _is_content(token):
            continue
        j = i - 1
        while j >= 0 and tokens[j] in _DETERMINERS:
            j -= 1
        roles.setdefault(token, tokens[j] if j >= 0 and tokens[j] in _PREPOSITIONS else None)
    return roles


def value_conflict(a: str, b: str) -> bool:
    """True when two texts close in meaning still state different values; see the module docstring.

    Deterministic and conservative: a True costs at most a near-copy stored, a False lets the similarity
    threshold decide.
    """
    ta, tb = _normalise(a), _normalise(b)
    if ta == tb:
        return False
    if sum(t in _NEGATORS for t in ta) % 2 != sum(t in _NEGATORS for t in tb) % 2:
        return True
    if {t for t in ta if _is_number(t)} != {t for t in tb if _is_number(t)}:
        return True
    content_a = Counter(t for t in ta if _is_content(t))
    content_b = Counter(t for t in tb if _is_content(t))
    if content_a == content_b:
        # Same words, moved: a conflict only when a word changed its role ("from X to Y" -> "from Y to X").
        ra, rb = _roles(ta), _roles(tb)
        return any(ra[t] != rb[t] for t in content_a)
    matcher = SequenceMatcher(None, ta, tb, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks())
    if kept < EDIT_OVERLAP * max(len(ta), len(tb)):
        return False  # restructured, not edited: the embedding judges paraphrase
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal" and any(_is_content(t) for t in (*ta[i1:i2], *tb[j1:j2])):
            return True
    return False
