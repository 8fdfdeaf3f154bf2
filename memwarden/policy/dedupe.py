"""When a candidate says the same thing as a live memory: embedding similarity, vetoed by value changes.

Cosine similarity alone cannot tell a paraphrase from a changed value: "migrating from MySQL to
PostgreSQL" and "... from PostgreSQL to MySQL" score higher than most true paraphrases, and so do
"every Monday" / "every Friday". So a duplicate needs two things:

1. `cosine >= DEDUPE_THRESHOLD` (the meaning is close: paraphrases count, word overlap alone does not);
2. no `value_conflict(a, b)`: a lexical veto for the changes embeddings blur. It reads each text as
   what a memory states, and fires when a stated value differs:

   - polarity: a negation added or removed ("don't", "never", "without", "avoid", "dislike");
   - a number, date or time: the figures, weekdays, months, seasons, parts of the day and time units
     one side has and the other lacks (the same ones moved, or one side adding a detail, are not a
     change);
   - an entity (a capitalised name) replaced by another;
   - an antonym (WordNet's: early / late, buy / sell) or a relational opposite (before / after);
   - a role: the same words with their roles exchanged ("from X to Y" -> "from Y to X", "Anna reports
     to the user" -> "the user reports to Anna"), read after undoing the passive voice, so "the car was
     repaired by the dealership" and "the dealership repaired the car" agree;
   - a tense: the same verb in another tense ("lives" / "lived", "is" / "was", "will move" / "moved");
   - a substitution: in a text that is an edit of the other (most words kept, or the changed word
     framed by kept ones), a content word replaced by one that is not a synonym. Synonyms are
     WordNet's (a shared sense: bought / purchased, finished / completed, tiny / small), so
     "vegetarian" -> "vegan" or "tea" -> "coffee" is a change while "completed" -> "finished" is not;
   - a person added (the statement is about someone else), or more than `MAX_DIFFERING` content words
     without a counterpart (the texts say different things).

   Function words (articles, prepositions, auxiliaries, "I" / "the user") never make a change on their
   own: "builds backends with Python and FastAPI" and "builds backends in Python with FastAPI" agree.

Both parts favour precision. A false duplicate (NOOP) silently drops a real new fact, the worst outcome
for a memory service; a missed duplicate only stores a near-copy that retrieval tolerates and a later
consolidation can merge. The veto is English-only; for other languages it only catches numbers and
names, and the threshold carries it.

`is_duplicate` and `cosine` are pure python (no numpy) and may run inside a Temporal workflow;
`value_conflict` needs both texts and reads the WordNet table (package data, loaded once on first use),
so the activity that finds the nearest neighbour computes it and hands the workflow a boolean, never
the text. A different embedding model needs a new measurement (`bench/dedupe_eval.py`): the scale of
cosine scores is model-specific.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from importlib import resources

DEDUPE_THRESHOLD = 0.73
"""Cosine similarity at or above which a candidate may be the same memory (subject to `value_conflict`).

Chosen with `bench/dedupe_eval.py` on the tuning set (`tests/data/dedupe_pairs.jsonl`) and checked on the
held-out set (`tests/data/dedupe_pairs_holdout.jsonl`); the figures are in docs/benchmarks.md.
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


# --- the lexicon -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lexicon:
    senses: dict[str, tuple[int, ...]]
    """Sense ids per lemma, as tuples of shared ints (a set per lemma would cost three times the memory)."""
    derived: frozenset[tuple[str, str]]
    antonyms: frozenset[tuple[str, str]]
    verbs: frozenset[str]
    adjectives: frozenset[str]
    persons: frozenset[str]
    forms: dict[str, tuple[str, ...]]


LEXICON_FILE = "wordnet_lexicon.json.gz"
"""Derived from Princeton WordNet 3.0 by `bench/build_wordnet_lexicon.py` (licence: data/WORDNET-LICENSE.txt)."""

_CLASSES: tuple[frozenset[str], ...] = (
    frozenset({"like", "enjoy", "love", "prefer"}),
    frozenset({"live", "based"}),
    frozenset({"birthday", "born", "bear"}),
)
"""Closed classes WordNet does not join that memories use as one predicate: a liking ("likes" / "enjoys" /
"prefers" Italian food), a home ("lives in" / "is based in" Toronto) and a birthday ("her birthday is
3 March" / "she was born on 3 March"). What is liked, where one lives and the date are the values,
compared by the other rules; the predicate only says which attribute it is."""

_OPPOSITES: frozenset[tuple[str, str]] = frozenset(
    {("after", "before"), ("above", "below"), ("over", "under"), ("less", "more"), ("fewer", "more")}
    | {("earlier", "later"), ("inside", "outside"), ("max", "min"), ("maximum", "minimum")}
)
"""Relational opposites among function words, which WordNet leaves out (it has no prepositions)."""

_lexicon: _Lexicon | None = None
_lexicon_lock = threading.Lock()


def _lex() -> _Lexicon:
    """The WordNet table, read once per process (about 0.1 s) on the first comparison."""
    global _lexicon
    if _lexicon is None:
        with _lexicon_lock:
            if _lexicon is None:
                raw = json.loads(
                    gzip.decompress(resources.files("memwarden").joinpath("data", LEXICON_FILE).read_bytes())
                )
                ints: dict[int, int] = {}
                senses = {sys.intern(w): tuple(ints.setdefault(i, i) for i in ids) for w, ids in raw["senses"].items()}
                for n, words in enumerate(_CLASSES):
                    for word in words:
                        senses[word] = (*senses.get(word, ()), -1 - n)
                antonyms = {(a, b) for a, b in raw["antonyms"]} | set(_OPPOSITES)
                derived = {(a, b) for a, b in raw["derived"]} | {(a, b) for a, b in raw["similar"]}
                _lexicon = _Lexicon(
                    senses=senses,
                    derived=frozenset(derived | {(b, a) for a, b in derived}),
                    antonyms=frozenset(antonyms | {(b, a) for a, b in antonyms}),
                    verbs=frozenset(map(sys.intern, raw["verbs"])),
                    adjectives=frozenset(map(sys.intern, raw["adjectives"])),
                    persons=frozenset(map(sys.intern, raw["persons"])),
                    forms={w: tuple(ls) for w, ls in raw["forms"].items()},
                )
    return _lexicon


_RULES: tuple[tuple[str, str], ...] = (
    ("ies", "y"),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("es", "e"),
    ("es", ""),
    ("s", ""),
    ("ied", "y"),
    ("ed", "e"),
    ("ed", ""),
    ("ing", "e"),
    ("ing", ""),
    ("er", ""),
    ("er", "e"),
    ("est", ""),
    ("est", "e"),
)
"""WordNet's own detachment rules (its `morphy`), plus a doubled final consonant (stopped -> stop)."""


def _known(word: str, lex: _Lexicon) -> bool:
    return word in lex.senses or word in lex.verbs


def _lemmas(word: str) -> frozenset[str]:
    """Every base form WordNet knows for a word (bought -> buy; lives -> live, life), or the word itself."""
    lex = _lex()
    out = set(lex.forms.get(word, ()))
    out.add(word)
    for suffix, repl in _RULES:
        if len(word) > len(suffix) + 1 and word.endswith(suffix):
            base = word[: -len(suffix)] + repl
            if suffix in ("er", "est") and base not in lex.adjectives:
                continue  # a comparative only of an adjective: "reminder" is not a form of "remind"
            if _known(base, lex):
                out.add(base)
            elif not repl and len(base) > 2 and base[-1] == base[-2] and _known(base[:-1], lex):
                out.add(base[:-1])
    if len(out) == 1 and len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        out.add(word[:-1])
    return frozenset(out)


def _synonyms(a: frozenset[str], b: frozenset[str]) -> bool:
    lex = _lex()
    if a & b:
        return True
    return any(
        (x, y) in lex.derived or not set(lex.senses.get(x, ())).isdisjoint(lex.senses.get(y, ())) for x in a for y in b
    )


def _antonyms(a: frozenset[str], b: frozenset[str]) -> bool:
    pairs = _lex().antonyms
    return any((x, y) in pairs for x in a for y in b)


def _is_verb(lemmas: frozenset[str]) -> bool:
    verbs = _lex().verbs
    return any(lemma in verbs for lemma in lemmas)


# --- reading a text --------------------------------------------------------------------------------

_RAW = re.compile(r"[^\W_]+(?:['\u2019.,:][^\W_]+)*")
"""Words and figures ("85,000", "7:40", "user's"); every separator must sit between two word characters,
so a match never backtracks (linear time)."""

_SENTENCE_END = re.compile(r"[.!?;:]")

_CONTRACTIONS: dict[str, tuple[str, ...]] = {
    "can't": ("can", "not"),
    "cannot": ("can", "not"),
    "won't": ("will", "not"),
    "shan't": ("shall", "not"),
    "ain't": ("is", "not"),
}
_SUFFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("n't", ("not",)),
    ("'m", ("am",)),
    ("'re", ("are",)),
    ("'ve", ("have",)),
    ("'ll", ("will",)),
    ("'d", ("would",)),
)
_IS_AFTER = frozenset({"it", "he", "she", "that", "there", "what", "who", "where", "here", "this"})
"""Before these, "'s" is "is" ("it's"); elsewhere it is a possessive ("user's")."""

_NUMBER_WORDS: dict[str, str] = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS |= {w: str(10 * (i + 3)) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split())}
_NUMBER_WORDS |= {
    w: str(i + 1) for i, w in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth".split())
}
_NUMBER_WORDS |= {"once": "1", "twice": "2", "thrice": "3", "half": "0.5", "dozen": "12", "single": "1"}
_NUMBER_WORDS |= {"hundred": "100", "thousand": "1000", "million": "1000000"}
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")
_DIGIT = re.compile(r"\d")

_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
"""Memories are about their owner: "I", "my" and "the user" name the same person."""

_ARTICLES = frozenset({"the", "a", "an"})

_NEGATORS = frozenset(
    {"not", "no", "never", "without", "nor", "neither", "none", "nothing", "nobody", "nowhere"}
    | {"avoid", "refuse", "dislike", "hate", "former", "formerly", "ex", "previously"}
)
"""Words (as lemmas) that flip a statement; compared by parity, so "don't drink" and "avoid drinking" agree,
"dislike" reads as "not like", and "a former teacher" is not "a teacher"."""

_BE = frozenset({"be", "am", "is", "are", "was", "were", "been", "being"})
_AUX_TENSE: dict[str, str] = {
    "am": "present",
    "is": "present",
    "are": "present",
    "was": "past",
    "were": "past",
    "do": "present",
    "does": "present",
    "did": "past",
    "has": "present",
    "have": "present",
    "had": "past",
    "will": "future",
    "shall": "future",
    "get": "present",
    "gets": "present",
    "got": "past",
}
_PREPOSITIONS = frozenset(
    {"from", "to", "over", "than", "into", "onto", "for", "with", "at", "on", "in", "by", "before", "after"}
    | {"under", "above", "against", "instead", "via", "toward", "towards", "about", "of", "per", "during"}
    | {"near", "behind", "within", "inside", "outside", "through", "across", "around", "between", "since"}
)
_DETERMINERS = frozenset({"this", "that", "these", "those", "every", "each", "some", "any", "all", "his", "her"})
_DETERMINERS |= frozenset({"their", "our", "your", "its", "other", "another", "such"})
_FUNCTION_WORDS = (
    _PREPOSITIONS
    | _DETERMINERS
    | _BE
    | frozenset({"user", "we", "us", "you", "he", "she", "they", "them", "it", "him", "one", "someone", "whenever"})
    | frozenset({"do", "does", "did", "have", "has", "had", "will", "would", "should", "shall", "can", "could"})
    | frozenset({"may", "might", "must", "and", "or", "but", "so", "as", "please", "also", "very", "really"})
    | frozenset({"just", "there", "here", "who", "which", "what", "when", "where", "while", "if", "because"})
    | frozenset(
        {"get", "gets", "got", "getting", "gotten", "how", "together", "order", "currently", "still", "already", "too"}
    )
    | frozenset({"big", "out", "up", "down", "off", "back", "whether", "then", "only", "usually", "normally"})
    | frozenset({"always", "often", "sometimes", "generally", "typically", "mostly", "either", "both"})
)
"""Words whose change alone does not make a different value (intensifiers and frequency adverbs included:
"is a fan" / "is a big fan", "usually" / "normally")."""

_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTHS = "january february march april may june july august september october november december".split()
_TEMPORAL: dict[str, str] = {w: w for w in _WEEKDAYS + _MONTHS}
_TEMPORAL |= {w + "s": w for w in _WEEKDAYS}
_TEMPORAL |= {w: w for w in "spring summer autumn winter morning afternoon evening night noon midnight".split()}
_TEMPORAL |= {"am": "morning", "pm": "pm", "tonight": "night", "weekend": "weekend", "weekday": "weekday"}
_TEMPORAL |= {w: w for w in "minute hour day week month year fortnight decade".split()}
_TEMPORAL |= {"daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "annually": "year"}
_TEMPORAL |= {"annual": "year", "hourly": "hour", "nightly": "night", "today": "today", "tomorrow": "tomorrow"}
_TEMPORAL |= {"yesterday": "yesterday", "next": "next", "last": "last", "ago": "ago", "previous": "last"}
_TEMPORAL |= {"mornings": "morning", "evenings": "evening", "nights": "night", "weekends": "weekend"}
_TEMPORAL |= {"weekdays": "weekday", "days": "day", "weeks": "week", "months": "month", "years": "year"}
_TEMPORAL |= {"hours": "hour", "minutes": "minute", "date": "date", "dates": "date"}
"""Times and dates as one canonical word each ("weekly" and "week", "am" and "morning")."""

_COORDINATORS = frozenset({"and", "or", "nor"})


@dataclass(frozen=True)
class _Token:
    word: str
    """Normalised: lower case, one spelling, numbers as digits, "I" / "my" as "user"."""
    lemmas: frozenset[str]
    kind: str
    """function | negator | number | temporal | entity | content"""
    possessive: bool = False


def _spelling(word: str) -> str:
    """British to American spelling, applied to both sides alike: colour/color, centre/center, organise/organize."""
    if len(word) <= 5 or _DIGIT.search(word):
        return word
    word = re.sub(r"our(?=(ite|ites|s|ed|ing|able)?$)", "or", word)
    word = re.sub(r"tre(s?)$", r"ter\1", word)
    return re.sub(r"is(e|es|ed|ing|ation|ations)$", r"iz\1", word)


def _read(text: str) -> list[_Token]:
    """The text as tokens, with contractions split, articles dropped and each word classified."""
    out: list[_Token] = []
    last_end = 0
    for match in _RAW.finditer(text.replace("\u2019", "'")):
        raw = match.group()
        initial = not out or bool(_SENTENCE_END.search(text, last_end, match.start()))
        last_end = match.end()
        low = raw.lower()
        words: list[str]
        possessive = False
        if low in _CONTRACTIONS:
            words = list(_CONTRACTIONS[low])
        else:
            words = [low]
            for suffix, expansion in _SUFFIXES:
                if low.endswith(suffix) and len(low) > len(suffix):
                    words = [low[: -len(suffix)], *expansion]
                    break
            else:
                if low.endswith("'s") and len(low) > 2:
                    base = low[:-2]
                    words, possessive = ([base, "is"], False) if base in _IS_AFTER else ([base], True)
                elif low.endswith("s'") and len(low) > 2:
                    words, possessive = [low[:-1]], True
        for n, word in enumerate(words):
            out.extend(_classify(word, raw if n == 0 else word, initial and n == 0, possessive and n == 0))
    return out


def _classify(word: str, raw: str, initial: bool, possessive: bool) -> list[_Token]:
    parts = [p for p in word.split("-") if p] if "-" in word else [word]
    tokens: list[_Token] = []
    for part in parts:
        if _DIGIT.search(part):
            ordinal = _ORDINAL.fullmatch(part)
            number = ordinal.group(1) if ordinal else part.replace(",", "")
            tokens.append(_Token(number, frozenset({number}), "number"))
            continue
        if part in _NUMBER_WORDS:
            tokens.append(_Token(_NUMBER_WORDS[part], frozenset({_NUMBER_WORDS[part]}), "number"))
            continue
        if part in _ARTICLES:
            tokens.append(_Token(part, frozenset({part}), "article"))
            continue
        if part in _FIRST_PERSON:
            possessive = possessive or part in ("my", "mine")
            part = "user"
        part = _spelling(part)
        if part in _TEMPORAL:
            tokens.append(_Token(_TEMPORAL[part], frozenset({_TEMPORAL[part]}), "temporal"))
            continue
        lemmas = _lemmas(part) if part not in _FUNCTION_WORDS else frozenset({part})
        if part in _FUNCTION_WORDS:
            kind = "function"
        elif lemmas & _NEGATORS or part in _NEGATORS:
            kind = "negator"
        elif raw[:1].isupper() and (not initial or not _known(part, _lex()) or raw.isupper()):
            kind = "entity"
        else:
            kind = "content"
        tokens.append(_Token(part, lemmas, kind, possessive))
    return tokens


# --- the checks ------------------------------------------------------------------------------------

_ADVERB_LIKE = frozenset({"not", "never", "always", "usually", "normally", "often", "also", "really", "just"})
_ADVERB_LIKE |= frozenset({"currently", "still", "already", "sometimes", "generally", "typically", "mostly"})


def _numbers(tokens: list[_Token]) -> set[str]:
    return {t.word for t in tokens if t.kind == "number"}


def _numbers_differ(ta: list[_Token], tb: list[_Token]) -> bool:
    """Different figures; "a day" and "one day" agree (the article is the number one)."""
    na, nb = _numbers(ta), _numbers(tb)
    if na == nb:
        return False
    has_a = any(t.kind == "article" and t.word != "the" for t in ta)
    has_b = any(t.kind == "article" and t.word != "the" for t in tb)
    return not ((na ^ nb) == {"1"} and (("1" in na and has_b) or ("1" in nb and has_a)))


def _two_sided(a: set[str], b: set[str]) -> bool:
    """Each side has something the other lacks: a replacement, not an added detail."""
    return bool(a - b) and bool(b - a)


def _polarity(tokens: list[_Token]) -> int:
    return sum(t.kind == "negator" for t in tokens) % 2


def _antonym_swap(ta: list[_Token], tb: list[_Token]) -> bool:
    """A word on one side whose opposite is on the other, neither shared (early / late, before / after)."""
    la = frozenset().union(*(t.lemmas for t in ta)) if ta else frozenset()
    lb = frozenset().union(*(t.lemmas for t in tb)) if tb else frozenset()
    only_a = [t.lemmas for t in ta if t.kind in ("content", "function") and not t.lemmas & lb]
    only_b = [t.lemmas for t in tb if t.kind in ("content", "function") and not t.lemmas & la]
    return any(_antonyms(x, y) for x in only_a for y in only_b)


def _aux_before(tokens: list[_Token], i: int) -> str | None:
    """The auxiliary governing the verb at i ("will move", "is training", "has been learning"), if any."""
    j = i - 1
    while j >= 0 and (tokens[j].word in _ADVERB_LIKE or tokens[j].kind == "negator"):
        j -= 1
    if j >= 0 and tokens[j].word in ("been", "being") and j - 1 >= 0:
        j -= 1
    if j >= 0 and tokens[j].word == "be":
        return "to"  # "to be reminded", "will be": the tense, if any, is on what comes before
    if j >= 0 and tokens[j].word in _AUX_TENSE:
        return tokens[j].word
    if j >= 1 and tokens[j].word == "to" and tokens[j - 1].word == "used":
        return "used"
    if j >= 0 and tokens[j].word == "to":
        return "to"
    return None


def _inflection(token: _Token) -> str:
    """ "past" for a past form (lived, bought), "s" for a third-person form (lives), "ing", else "base"."""
    word = token.word
    lex = _lex()
    if any(lemma != word and lemma in lex.verbs for lemma in lex.forms.get(word, ())):
        return "s" if word.endswith("s") and not word.endswith("ss") else "past"
    if not any(lemma != word and lemma in lex.verbs for lemma in token.lemmas):
        return "base"
    if word.endswith("ed"):
        return "past"
    if word.endswith("ing"):
        return "ing"
    if word.endswith("s"):
        return "s"
    return "base"


def _nominal(tokens: list[_Token], i: int) -> bool:
    """A word that can be a verb used as a noun or a modifier: after an article, a determiner or a
    possessive ("a reminder", "my dog's name"), or a past form right after a noun ("a dog named Max")."""
    if i == 0:
        return False
    before = tokens[i - 1]
    if before.kind == "article" or before.word in _DETERMINERS or before.possessive:
        return True
    return (
        _inflection(tokens[i]) == "past"
        and before.kind == "content"
        and i >= 2
        and (tokens[i - 2].kind == "article" or tokens[i - 2].word in _DETERMINERS or tokens[i - 2].possessive)
    )


def _tenses(tokens: list[_Token]) -> dict[str, set[str]]:
    """Each verb lemma's tenses: the auxiliary's when it has one, else the verb form's own.

    A form of "be" or "have" followed by a verb is an auxiliary, not a verb of its own ("was born",
    "is training"), so "I was born in 1985" and "my birth year is 1985" share no tensed verb.
    """
    out: dict[str, set[str]] = {}
    for i, token in enumerate(tokens):
        if token.kind not in ("content", "function") or token.possessive:
            continue
        if token.word in _BE or token.word in ("has", "have", "had"):
            nxt = next((t for t in tokens[i + 1 :] if t.word not in _ADVERB_LIKE and t.kind != "negator"), None)
            if nxt is not None and (
                nxt.word in _BE
                or (nxt.kind == "content" and _is_verb(nxt.lemmas) and _inflection(nxt) in ("past", "ing"))
            ):
                continue  # an auxiliary
            lemma = "be" if token.word in _BE else "have"
            tense = _AUX_TENSE.get(token.word)
            if tense is not None and _aux_before(tokens, i) is None:
                out.setdefault(lemma, set()).add(tense)
            continue
        if token.kind != "content" or not _is_verb(token.lemmas) or _nominal(tokens, i):
            continue
        aux = _aux_before(tokens, i)
        form = _inflection(token)
        if aux == "to":
            continue  # an infinitive has no tense of its own
        if aux == "used":
            tense = "past"
        elif aux is not None:
            tense = _AUX_TENSE[aux]
        elif form == "past":
            tense = "past"
        elif form == "ing":
            continue  # a gerund or a participle without its auxiliary
        else:
            tense = "present"
        for lemma in token.lemmas & _lex().verbs:
            out.setdefault(lemma, set()).add(tense)
    return out


def _tense_changed(ta: list[_Token], tb: list[_Token]) -> bool:
    """The same verb in another tense: "lives" / "lived", "is" / "was", "will move" / "moved"."""
    a, b = _tenses(ta), _tenses(tb)
    return any(a[lemma].isdisjoint(b[lemma]) for lemma in a.keys() & b.keys())


def _pivot(ta: list[_Token], tb: list[_Token]) -> tuple[int, int] | None:
    """The positions of the main verb both texts share (earliest in the first text), if there is one."""
    verbs_b = {lemma: i for i in range(len(tb) - 1, -1, -1) for lemma in tb[i].lemmas if tb[i].kind == "content"}
    for i, token in enumerate(ta):
        if token.kind != "content" or token.possessive or not _is_verb(token.lemmas):
            continue
        for lemma in sorted(token.lemmas & _lex().verbs):
            j = verbs_b.get(lemma)
            if j is not None and not tb[j].possessive:
                return i, j
    return None


def _copular(tokens: list[_Token]) -> bool:
    """A main verb "be" ("X is Y"): its two sides can trade places without changing the statement."""
    for i, token in enumerate(tokens):
        if token.word in _BE:
            nxt = next((t for t in tokens[i + 1 :] if t.word not in _ADVERB_LIKE and t.kind != "negator"), None)
            if nxt is None or not (
                nxt.kind == "content" and _is_verb(nxt.lemmas) and _inflection(nxt) in ("past", "ing")
            ):
                return True
    return False


def _roles(tokens: list[_Token], pivot: int | None) -> dict[str, str]:
    """Each participant's role: the preposition that governs it, else subject or object of the pivot verb.

    The passive is undone: before a passive verb is the object, "by X" is the subject. A conjunct takes
    the role of the word it is joined to ("allergic to dust and pollen").
    """
    passive = False
    if pivot is not None:
        j = pivot - 1
        while j >= 0 and (tokens[j].word in _ADVERB_LIKE or tokens[j].kind == "negator"):
            j -= 1
        passive = j >= 0 and tokens[j].word in (_BE | {"get", "gets", "got"}) and _inflection(tokens[pivot]) == "past"
    roles: dict[str, str] = {}
    previous_role: str | None = None
    for i, token in enumerate(tokens):
        participant = token.kind in ("content", "entity") or (token.word == "user" and not token.possessive)
        if not participant or i == pivot or token.possessive:
            if token.kind not in ("article",) and token.word not in _DETERMINERS and token.word not in _COORDINATORS:
                if not (token.possessive or token.kind in ("content", "entity")):
                    previous_role = None if token.word in _PREPOSITIONS else previous_role
            continue
        j = i - 1
        while j >= 0 and (
            tokens[j].kind in ("article", "number")
            or tokens[j].word in _DETERMINERS
            or tokens[j].possessive
            or (tokens[j].kind == "content" and j != pivot and not _is_verb(tokens[j].lemmas))
        ):
            j -= 1
        if j >= 0 and tokens[j].word in _COORDINATORS and previous_role is not None:
            role = previous_role
        elif j >= 0 and tokens[j].word in _PREPOSITIONS:
            role = "by" if tokens[j].word == "by" and passive else f"p:{tokens[j].word}"
            if role == "by":
                role = "subject"
        elif pivot is None:
            role = "bare"
        else:
            before = i < pivot
            role = ("object" if before else "after") if passive else ("subject" if before else "object")
        for lemma in token.lemmas:
            roles.setdefault(lemma, role)
        previous_role = role
    return roles


def _first_participant(tokens: list[_Token]) -> _Token | None:
    return next((t for t in tokens if t.kind in ("entity", "content") and not t.possessive), None)


def _roles_swapped(ta: list[_Token], tb: list[_Token]) -> bool:
    """Two words that traded roles: "from X to Y" / "from Y to X", "Anna reports to the user" / the reverse,
    or two names that both texts hold with the other one first ("Jon: thanks, Gina" / "Gina: thanks, Jon":
    who speaks or acts changed)."""
    first_a, first_b = _first_participant(ta), _first_participant(tb)
    if first_a is not None and first_b is not None and first_a.kind == first_b.kind == "entity":
        names_a, names_b = _kinds(ta, "entity"), _kinds(tb, "entity")
        if first_a.word != first_b.word and {first_a.word, first_b.word} <= names_a & names_b:
            return True
    pivot = _pivot(ta, tb)
    copular = _copular(ta) or _copular(tb)
    ra = _roles(ta, None if pivot is None else pivot[0])
    rb = _roles(tb, None if pivot is None else pivot[1])
    shared = [w for w in ra if w in rb]
    for n, x in enumerate(shared):
        for y in shared[n + 1 :]:
            if ra[x] == ra[y] or ra[x] != rb[y] or ra[y] != rb[x]:
                continue
            bare = {ra[x], ra[y]} <= {"subject", "object", "bare", "after"}
            if bare and (copular or pivot is None):
                continue  # "X is Y" / "Y is X", or no shared verb to read subject and object from
            return True
    return False


def _content(tokens: list[_Token], other: list[_Token]) -> list[_Token]:
    """Content words and names, with two adjacent words joined when the other text writes them as one
    ("time zone" / "timezone")."""
    words = {t.word for t in other}
    out: list[_Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if i + 1 < len(tokens) and token.word + tokens[i + 1].word in words:
            joined = token.word + tokens[i + 1].word
            out.append(_Token(joined, frozenset({joined}), "content"))
            i += 2
            continue
        if token.kind in ("content", "entity"):
            out.append(token)
        i += 1
    return out


def _unmatched(side: list[_Token], other: list[_Token]) -> list[_Token]:
    return [t for t in side if not any(_synonyms(t.lemmas, o.lemmas) for o in other)]


EDIT_OVERLAP = 0.5
"""A pair is an *edit* (one text is the other with a few words changed) when more than this share of the
longer one's words are kept verbatim and in order; an edit that replaces a content word by a non-synonym
states a new value. At exactly this share (half the words kept) the pair is as much restructured as
edited, and only a replaced verb counts: "rents" / "owns" the apartment is a new value, "my phone is an
iPhone" / "I use an iPhone" is not."""


def _verbal(tokens: list[_Token], token: _Token) -> bool:
    """Used as a verb: a verb lemma first in the text (an imperative) or after its subject or "to"."""
    if not _is_verb(token.lemmas) or token.kind != "content":
        return False
    i = tokens.index(token)
    if i == 0:
        return True
    before = tokens[i - 1]
    return (before.word in ("user", "to", "he", "she", "they", "we", "you", "it") and not before.possessive) or (
        before.word in _ADVERB_LIKE or before.word in _AUX_TENSE or before.word in _BE
    )


def _substituted(ta: list[_Token], tb: list[_Token]) -> bool:
    """An edit in which a content word was replaced by one that is not its synonym."""
    ca, cb = _content(ta, tb), _content(tb, ta)
    ua, ub = _unmatched(ca, cb), _unmatched(cb, ca)
    if not ua or not ub:
        return False  # only added words (a detail, an intensifier), or nothing changed
    wa = [t.word for t in ta if t.kind != "article"]
    wb = [t.word for t in tb if t.kind != "article"]
    matcher = SequenceMatcher(None, wa, wb, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks()) / max(len(wa), len(wb))
    if kept > EDIT_OVERLAP:
        return True
    verbs_replaced = any(_verbal(ta, t) for t in ua) and any(_verbal(tb, t) for t in ub)
    return (kept == EDIT_OVERLAP and verbs_replaced) or _replaced_in_frame(ca, cb)


def _replaced_in_frame(ca: list[_Token], cb: list[_Token]) -> bool:
    """A content word replaced between two kept ones: "uses the *staging* cluster for demos" / "from now on
    always use the *production* cluster for demos". Words added around a statement dilute how much of
    it is kept, not the change inside it. Synonyms count as kept (they share a key)."""
    keys_a = [min(t.lemmas) for t in ca]
    keys_b: list[str] = []
    for t in cb:
        match = next((min(o.lemmas) for o in ca if _synonyms(t.lemmas, o.lemmas)), None)
        keys_b.append(match if match is not None else f"\x00{t.word}")
    opcodes = SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes()
    tags = [op[0] for op in opcodes]
    return any(tags[n - 1 : n + 2] == ["equal", "replace", "equal"] for n in range(1, len(tags) - 1))


def _person_added(ta: list[_Token], tb: list[_Token]) -> bool:
    """A person on one side only: the statement is about someone else ("my son is allergic to ...")."""
    persons = _lex().persons
    ca, cb = _content(ta, tb), _content(tb, ta)
    for side, other in ((ca, cb), (cb, ca)):
        if any(t.lemmas & persons for t in _unmatched(side, other)) and not _unmatched(other, side):
            return True
    return False


def _kinds(tokens: list[_Token], kind: str) -> set[str]:
    return {t.word for t in tokens if t.kind == kind}


MAX_DIFFERING = 5
"""More content words than this, on the two sides together, without a counterpart on the other side: the
texts say different things, however close their embeddings (two chatty conversation turns of one
speaker often score as high as a paraphrase). No labelled paraphrase differs in more than five."""


def _differing_content(ta: list[_Token], tb: list[_Token]) -> int:
    ca, cb = _content(ta, tb), _content(tb, ta)
    return len(_unmatched(ca, cb)) + len(_unmatched(cb, ca))


MAX_TOKENS = 120
"""Longer texts are compared only for equality (`value_conflict` is True unless they read the same): the
pairwise checks are quadratic in the words, a memory that long is rare, and a missed duplicate is the
safe error."""


def _checks(a: str, b: str) -> Iterator[str]:
    """The veto's rules that fire for this pair, lazily, in order (the first one is enough to veto)."""
    ta, tb = _read(a), _read(b)
    if [t.word for t in ta] == [t.word for t in tb]:
        return
    if max(len(ta), len(tb)) > MAX_TOKENS:
        yield "length"
        return
    checks: tuple[tuple[str, Callable[[], bool]], ...] = (
        ("polarity", lambda: _polarity(ta) != _polarity(tb)),
        ("number", lambda: _numbers_differ(ta, tb)),
        ("time", lambda: _two_sided(_kinds(ta, "temporal"), _kinds(tb, "temporal"))),
        ("entity", lambda: _two_sided(_kinds(ta, "entity"), _kinds(tb, "entity"))),
        ("antonym", lambda: _antonym_swap(ta, tb)),
        ("tense", lambda: _tense_changed(ta, tb)),
        ("role", lambda: _roles_swapped(ta, tb)),
        ("substitution", lambda: _substituted(ta, tb)),
        ("person", lambda: _person_added(ta, tb)),
        ("content", lambda: _differing_content(ta, tb) > MAX_DIFFERING),
    )
    for name, fired in checks:
        if fired():
            yield name


def conflict_reasons(a: str, b: str) -> list[str]:
    """Every rule of the veto that fires for this pair, by name (for `bench/dedupe_eval.py` and tests)."""
    return list(_checks(a, b))


def value_conflict(a: str, b: str) -> bool:
    """True when two texts close in meaning still state different values; see the module docstring.

    Deterministic and conservative: a True costs at most a near-copy stored, a False lets the similarity
    threshold decide.
    """
    return next(_checks(a, b), None) is not None  # the first rule that fires decides
