"""Measure the dedupe rule (cosine threshold + value-conflict veto) on labelled pairs: tune on one set, report both.

    .venv/bin/python -m bench.dedupe_eval [--tune tests/data/dedupe_pairs.jsonl]
        [--holdout tests/data/dedupe_pairs_holdout.jsonl] [--min-precision 0.98] [--margin 0.01] [--verbose]
        [--publish]

Each line of a pairs file is `{"a": ..., "b": ..., "duplicate": bool, "kind": ...}`: paraphrases are
duplicates; pairs that change a value (a number, a date, a name, a negation, an antonym, a role, a
tense, or a same-topic different value) are not. Pairs are embedded with the default embedder, and a
pair is predicted duplicate when `is_duplicate(cosine, value_conflict=...)` says so (the gate's rule).

The threshold is chosen on the tuning set only: the lowest one above which no labelled non-duplicate
there is called a duplicate, plus `--margin`. The held-out set (written before any tuning) is then
scored at the configured `DEDUPE_THRESHOLD`, never used to choose it. The output ends with a markdown
table of both sets (for docs/benchmarks.md) and the held-out set by kind.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench import report
from memwarden.embed import default_embedder
from memwarden.policy.dedupe import DEDUPE_THRESHOLD, conflict_reasons, cosine, is_duplicate

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TUNE_PAIRS = DATA / "dedupe_pairs.jsonl"
HOLDOUT_PAIRS = DATA / "dedupe_pairs_holdout.jsonl"


@dataclass(frozen=True)
class Scored:
    a: str
    b: str
    similarity: float
    duplicate: bool
    kind: str
    reasons: tuple[str, ...] = ()

    @property
    def conflict(self) -> bool:
        return bool(self.reasons)


@dataclass(frozen=True)
class Metrics:
    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def load_pairs(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def score_pairs(pairs: list[dict[str, object]]) -> list[Scored]:
    """Cosine similarity of each pair under the default embedder, and the veto's reasons."""
    embedder = default_embedder()
    left = embedder.embed([str(p["a"]) for p in pairs])
    right = embedder.embed([str(p["b"]) for p in pairs])
    return [
        Scored(
            str(p["a"]),
            str(p["b"]),
            cosine(x, y),
            bool(p["duplicate"]),
            str(p.get("kind", "")),
            tuple(conflict_reasons(str(p["a"]), str(p["b"]))),
        )
        for x, y, p in zip(left, right, pairs, strict=True)
    ]


def predicted(s: Scored, threshold: float, *, veto: bool = True) -> bool:
    return is_duplicate(s.similarity, value_conflict=veto and s.conflict, threshold=threshold)


def metrics_at(scored: Iterable[Scored], threshold: float, *, veto: bool = True) -> Metrics:
    """Confusion counts when a pair is called duplicate by the gate's rule (or by cosine alone)."""
    tp = fp = fn = tn = 0
    for s in scored:
        p = predicted(s, threshold, veto=veto)
        tp += s.duplicate and p
        fp += (not s.duplicate) and p
        fn += s.duplicate and not p
        tn += (not s.duplicate) and not p
    return Metrics(threshold, tp, fp, fn, tn)


def sweep(
    scored: list[Scored], lo: float = 0.50, hi: float = 0.99, step: float = 0.01, *, veto: bool = True
) -> list[Metrics]:
    count = round((hi - lo) / step) + 1
    return [metrics_at(scored, round(lo + i * step, 4), veto=veto) for i in range(count)]


def best_recall(results: list[Metrics], min_precision: float) -> Metrics | None:
    """Best recall with precision >= min_precision; ties go to the higher (safer) threshold."""
    ok = [m for m in results if m.precision >= min_precision and m.tp > 0]
    return max(ok, key=lambda m: (m.recall, m.threshold)) if ok else None


def choose(results: list[Metrics], margin: float) -> float | None:
    """The lowest threshold above which no labelled non-duplicate is called a duplicate, plus a margin."""
    clean = None
    for m in sorted(results, key=lambda m: m.threshold, reverse=True):
        if m.fp:
            break
        clean = m.threshold
    return None if clean is None else round(min(clean + margin, 1.0), 4)


def _row(name: str, scored: list[Scored], min_precision: float) -> str:
    m = metrics_at(scored, DEDUPE_THRESHOLD)
    alone = best_recall(sweep(scored, veto=False), min_precision)
    alone_text = "never" if alone is None else f"{alone.recall:.3f} (at {alone.threshold:.2f})"
    ok = "yes" if m.precision >= min_precision and m.recall >= 0.80 else "no"
    return (
        f"| {name} | {len(scored)} | {sum(s.duplicate for s in scored)} | {DEDUPE_THRESHOLD:.2f} | "
        f"{m.precision:.3f} | {m.recall:.3f} | {m.fp} | {alone_text} | {ok} |"
    )


def markdown(sets: list[tuple[str, list[Scored]]], min_precision: float) -> str:
    lines = [
        f"| set | pairs | duplicates | threshold | precision | recall | false duplicates "
        f"| cosine alone: best recall at precision >= {min_precision} | recall >= 0.80 at precision >= "
        f"{min_precision} |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    lines += [_row(name, scored, min_precision) for name, scored in sets]
    return "\n".join(lines)


def by_kind(scored: list[Scored]) -> str:
    lines = ["| kind | pairs | answered as labelled | vetoed by |", "|---|---:|---:|---|"]
    for kind in sorted({s.kind for s in scored}):
        group = [s for s in scored if s.kind == kind]
        right = sum(predicted(s, DEDUPE_THRESHOLD) == s.duplicate for s in group)
        vetoes: dict[str, int] = {}
        for s in group:
            for r in s.reasons:
                vetoes[r] = vetoes.get(r, 0) + 1
        veto_text = ", ".join(f"{r} {n}" for r, n in sorted(vetoes.items(), key=lambda x: -x[1])) or "-"
        lines.append(f"| {kind} | {len(group)} | {right} | {veto_text} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tune", type=Path, default=TUNE_PAIRS)
    parser.add_argument("--holdout", type=Path, default=HOLDOUT_PAIRS)
    parser.add_argument("--min-precision", type=float, default=0.98)
    parser.add_argument("--margin", type=float, default=0.01)
    parser.add_argument("--verbose", action="store_true", help="list every pair the rule answers wrongly")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()

    tune = score_pairs(load_pairs(args.tune))
    holdout = score_pairs(load_pairs(args.holdout))
    results = sweep(tune)
    print(f"tuning set {args.tune.name}: {len(tune)} pairs, {sum(s.duplicate for s in tune)} duplicates")
    print("threshold  precision  recall   tp  fp  fn  tn   (cosine + veto)")
    for m in results:
        print(f"  {m.threshold:.2f}      {m.precision:.3f}    {m.recall:.3f}  {m.tp:3d} {m.fp:3d} {m.fn:3d} {m.tn:3d}")
    recommended = choose(results, args.margin)
    print(
        f"recommended on the tuning set: {recommended} (lowest threshold with no false duplicate, "
        f"+{args.margin}); configured DEDUPE_THRESHOLD = {DEDUPE_THRESHOLD}"
    )
    if args.verbose:
        for name, scored in (("tuning", tune), ("held-out", holdout)):
            for s in scored:
                if predicted(s, DEDUPE_THRESHOLD) != s.duplicate:
                    label = "missed duplicate" if s.duplicate else "FALSE DUPLICATE"
                    print(f"  {name}: {label} {s.similarity:.3f} {list(s.reasons)} {s.a!r} | {s.b!r}")
    sets = [(f"tuning ({args.tune.name})", tune), (f"held out ({args.holdout.name})", holdout)]
    body = "\n\n".join(
        [
            markdown(sets, args.min_precision),
            f"The threshold is the tuning set's choice ({recommended}: the lowest with no false duplicate there, "
            f"+{args.margin}); the held-out pairs were written before any tuning. The held-out set by kind:",
            by_kind(holdout),
        ]
    )
    print()
    print(body)
    if args.publish:
        report.publish("dedupe_eval", body)


if __name__ == "__main__":
    main()
