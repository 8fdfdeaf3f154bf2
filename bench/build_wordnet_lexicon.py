"""Build `memwarden/data/wordnet_lexicon.json.gz`, the lexicon the dedupe veto reads, from WordNet 3.0.

    apt-get install wordnet-base     # Debian's copy of Princeton WordNet 3.0 (/usr/share/wordnet)
    .venv/bin/python bench/build_wordnet_lexicon.py [--wordnet /usr/share/wordnet]

Why a derived table and not WordNet itself at run time: the veto needs three relations only (which
words share a sense, which are direct antonyms, which words are verbs and what their irregular forms
are), and a 1 MB table shipped as package data costs nothing to install, while the full database is
30 MB of system files and a reader library. The table is a pure function of the WordNet files, so
rerunning this script reproduces it byte for byte.

What it holds (all lower case; multiword lemmas with spaces):
- `senses`: lemma -> ids of the synonym sets it belongs to among its `TOP_SENSES` most frequent senses
  in each part of speech (WordNet's index files list senses by frequency), keeping only sets with two or
  more lemmas (a one-lemma set makes no synonym). The cut keeps rare senses from making synonyms of
  everyday words: "learn" has an archaic sense shared with "teach", its fifth.
- `similar`: pairs of an adjective and the head it is "similar to" (tiny / small). Only that pair: two
  satellites of one head are not synonyms (blue and green are both "chromatic").
- `derived`: pairs of lemmas WordNet links as derivationally related (pay / payment, violin / violinist).
- `antonyms`: pairs of lemmas WordNet marks as direct antonyms (buy / sell, early / late).
- `persons`: nouns whose most frequent sense is a person (son, manager, fan): a person added on one
  side changes whom the statement is about ("I'm allergic to peanuts" / "my son is ...").
- `verbs`, `adjectives`: every single-word verb and adjective lemma (tense is read off verbs only, and
  "-er" / "-est" are stripped from adjectives only, so "reminder" is not a form of "remind").
- `forms`: irregular inflections -> lemmas, from the `*.exc` files (bought -> buy, children -> child).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "memwarden" / "data" / "wordnet_lexicon.json.gz"
FILES = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
TOP_SENSES = 3
"""Senses of a word that may make it a synonym of another (its most frequent ones, per part of speech)."""
_MARKER = re.compile(r"\([a-z]+\)$")


def _lemma(word: str) -> str:
    return _MARKER.sub("", word).replace("_", " ").lower()


NOUN_PERSON = "18"
"""WordNet's lexicographer file noun.person."""


def _first_senses(wordnet: Path) -> dict[str, str]:
    """Each single-word noun's most frequent synset (offset)."""
    first: dict[str, str] = {}
    for line in (wordnet / "index.noun").read_text(encoding="latin-1").splitlines():
        if line.startswith("  "):
            continue
        fields = line.split()
        lemma = _lemma(fields[0])
        if " " not in lemma:
            first[lemma] = fields[len(fields) - int(fields[2])]
    return first


def _top_senses(wordnet: Path) -> set[tuple[str, tuple[str, str]]]:
    """(lemma, synset) for each lemma's `TOP_SENSES` most frequent senses in each part of speech."""
    top: set[tuple[str, tuple[str, str]]] = set()
    for name, pos in FILES.items():
        for line in (wordnet / f"index.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):
                continue
            fields = line.split()
            lemma, synsets = _lemma(fields[0]), int(fields[2])
            for offset in fields[len(fields) - synsets :][:TOP_SENSES]:
                top.add((lemma, (pos, offset)))
    return top


def build(wordnet: Path) -> dict[str, object]:
    members: dict[tuple[str, str], list[str]] = {}
    lexfile: dict[tuple[str, str], str] = {}
    common: dict[tuple[str, str], set[str]] = {}
    """Per synset, its lemmas as WordNet writes them in lower case (not names: "More" is Thomas More)."""
    similar: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    lexical: list[tuple[str, tuple[str, str], int, tuple[str, str], int]] = []
    verbs: set[str] = set()
    adjectives: set[str] = set()
    for name, pos in FILES.items():
        for line in (wordnet / f"data.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):
                continue  # the licence header
            fields = line.split(" | ", 1)[0].split()
            offset, kind = fields[0], fields[2]
            key = (pos, offset)
            count = int(fields[3], 16)
            words = [_lemma(fields[4 + 2 * i]) for i in range(count)]
            members[key] = words
            lexfile[key] = fields[1]
            common[key] = {_lemma(fields[4 + 2 * i]) for i in range(count) if fields[4 + 2 * i].islower()}
            single = {w for w in words if " " not in w}
            if pos == "v":
                verbs.update(single)
            elif pos == "a":
                adjectives.update(single)
            i = 4 + 2 * count
            pointers = int(fields[i])
            i += 1
            for _ in range(pointers):
                symbol, target, target_pos, source_target = fields[i : i + 4]
                i += 4
                target_key = ("a" if target_pos == "s" else target_pos, target)
                if symbol in ("!", "+"):
                    src, dst = int(source_target[:2], 16), int(source_target[2:], 16)
                    lexical.append((symbol, key, src, target_key, dst))
                elif symbol == "&" and kind == "s":
                    similar[key].append(target_key)
    antonyms: set[tuple[str, str]] = set()
    derived: set[tuple[str, str]] = set()
    for symbol, key, src, target_key, dst in lexical:
        a, b = members[key][src - 1], members[target_key][dst - 1]
        if a != b and " " not in a and " " not in b:
            (antonyms if symbol == "!" else derived).add((min(a, b), max(a, b)))

    top = _top_senses(wordnet)
    ids: dict[tuple[str, str], int] = {}
    senses: dict[str, set[int]] = defaultdict(set)
    for key, words in sorted(members.items()):
        if len(set(words)) < 2:
            continue
        for word in words:
            if (word, key) in top:
                senses[word].add(ids.setdefault(key, len(ids)))
    alike: set[tuple[str, str]] = set()
    for key, heads in similar.items():
        for word in members[key]:
            for head in heads:
                for head_word in members[head]:
                    if (word, key) in top and (head_word, head) in top and word != head_word:
                        alike.add((min(word, head_word), max(word, head_word)))

    forms: dict[str, set[str]] = defaultdict(set)
    for name in FILES:
        for line in (wordnet / f"{name}.exc").read_text(encoding="latin-1").splitlines():
            inflected, *lemmas = line.split()
            forms[_lemma(inflected)].update(_lemma(lemma) for lemma in lemmas)
    return {
        "source": f"Princeton WordNet 3.0, top {TOP_SENSES} senses",
        "senses": {w: sorted(s) for w, s in sorted(senses.items())},
        "similar": sorted([a, b] for a, b in alike),
        "derived": sorted([a, b] for a, b in derived),
        "antonyms": sorted([a, b] for a, b in antonyms),
        "persons": sorted(
            w for w, o in _first_senses(wordnet).items() if lexfile[("n", o)] == NOUN_PERSON and w in common[("n", o)]
        ),
        "verbs": sorted(verbs),
        "adjectives": sorted(adjectives),
        "forms": {w: sorted(s) for w, s in sorted(forms.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    table = build(args.wordnet)
    data = json.dumps(table, separators=(",", ":"), sort_keys=True).encode()
    args.out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(
        f"{args.out}: {len(table['senses'])} lemmas, {len(table['derived'])} derived and "  # type: ignore[arg-type]
        f"{len(table['antonyms'])} antonym pairs, "  # type: ignore[arg-type]
        f"{len(table['verbs'])} verbs, {len(table['forms'])} irregular forms; {args.out.stat().st_size} bytes"  # type: ignore[arg-type]
    )


if __name__ == "__main__":
    main()
