"""Sweep the dedupe cosine threshold over a labelled set of sentence pairs and pick one.

    .venv/bin/python -m bench.dedupe_eval [--pairs tests/data/dedupe_pairs.jsonl] [--min-precision 0.95] [--publish]

Each line of the pairs file is `{"a": ..., "b": ..., "duplicate": bool, "kind": ...}`: paraphrases are
duplicates; same-topic pairs with a different value ("I live in Paris" / "I live in Lyon"), negations,
related-but-distinct and unrelated pairs are not. Pairs are embedded with the default embedder, and for
each threshold a pair is predicted duplicate when `is_duplicate(cosine, value_conflict=...)` says so (the
gate's rule); the same sweep with cosine alone is printed for comparison.

The recommended threshold is the lowest one above which no labelled non-duplicate is called a duplicate,
plus `--margin` (0.02): a false duplicate (NOOP) loses a real new fact, while a missed duplicate only
stores a near-copy. The best recall at precision >= `--min-precision` is printed too, for comparison.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from bench import report
from memwarden.embed import default_embedder
from memwarden.policy.dedupe import DEDUPE_THRESHOLD, cosine, is_duplicate, value_conflict

DEFAULT_PAIRS = Path(__file__).resolve().parent.parent / "tests" / "data" / "dedupe_pairs.jsonl"


@dataclass(frozen=True)
class Scored:
    similarity: float
    duplicate: bool
    kind: str
    conflict: bool = False


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

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def load_pairs(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def score_pairs(pairs: list[dict[str, object]]) -> list[Scored]:
    """Cosine similarity of each pair under the default embedder (one batch per side)."""
    embedder = default_embedder()
    left = embedder.embed([str(p["a"]) for p in pairs])
    right = embedder.embed([str(p["b"]) for p in pairs])
    return [
        Scored(cosine(a, b), bool(p["duplicate"]), str(p.get("kind", "")), value_conflict(str(p["a"]), str(p["b"])))
        for a, b, p in zip(left, right, pairs, strict=True)
    ]


def metrics_at(scored: list[Scored], threshold: float, *, veto: bool = True) -> Metrics:
    """Confusion counts when a pair is called duplicate by the gate's rule (or by cosine alone)."""
    predicted = [is_duplicate(s.similarity, value_conflict=veto and s.conflict, threshold=threshold) for s in scored]
    tp = sum(1 for s, p in zip(scored, predicted, strict=True) if s.duplicate and p)
    fp = sum(1 for s, p in zip(scored, predicted, strict=True) if not s.duplicate and p)
    fn = sum(1 for s, p in zip(scored, predicted, strict=True) if s.duplicate and not p)
    tn = sum(1 for s, p in zip(scored, predicted, strict=True) if not s.duplicate and not p)
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


def choose(results: list[Metrics], margin: float = 0.02) -> float | None:
    """The recommended threshold: the lowest one above which no labelled non-duplicate is called a
    duplicate, plus a safety margin (the veto, not the margin, should be what lower thresholds rest on)."""
    clean = None
    for m in sorted(results, key=lambda m: m.threshold, reverse=True):
        if m.fp:
            break
        clean = m.threshold
    return None if clean is None else round(min(clean + margin, 1.0), 4)


def markdown(scored: list[Scored], pairs: Path, min_precision: float, margin: float) -> str:
    """The run as docs/benchmarks.md shows it: the configured threshold, the recommended one, the best
    recall at the precision floor, for the gate's rule and for cosine alone."""
    rows: list[list[object]] = []

    def add(rule: str, m: Metrics | None) -> None:
        if m is None:
            rows.append([rule, "none", "", "", ""])
        else:
            rows.append([rule, f"{m.threshold:.2f}", f"{m.precision:.3f}", f"{m.recall:.3f}", f"{m.f1:.3f}"])

    add("the gate's rule (cosine + value-conflict veto), configured", metrics_at(scored, DEDUPE_THRESHOLD))
    for veto, label in ((True, "the gate's rule"), (False, "cosine alone")):
        results = sweep(scored, veto=veto)
        recommended = choose(results, margin)
        add(
            f"{label}, recommended (no false duplicate above it, +{margin} margin)",
            None if recommended is None else metrics_at(scored, recommended, veto=veto),
        )
        add(f"{label}, best recall at precision >= {min_precision}", best_recall(results, min_precision))
    try:
        where = pairs.resolve().relative_to(Path(__file__).resolve().parents[1])
    except ValueError:
        where = pairs
    return "\n\n".join(
        [
            report.table(["rule", "threshold", "precision", "recall", "F1"], rows),
            f"{len(scored)} labelled pairs ({sum(s.duplicate for s in scored)} duplicates) from `{where}`.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS)
    parser.add_argument("--min-precision", type=float, default=0.95)
    parser.add_argument("--margin", type=float, default=0.02)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()

    pairs = load_pairs(args.pairs)
    scored = score_pairs(pairs)
    print(f"{len(scored)} pairs: {sum(s.duplicate for s in scored)} duplicates")

    kinds = sorted({s.kind for s in scored})
    print("\nsimilarity by kind (min / mean / max):")
    for kind in kinds:
        sims = [s.similarity for s in scored if s.kind == kind]
        print(f"  {kind:16s} n={len(sims):3d}  {min(sims):.3f} / {sum(sims) / len(sims):.3f} / {max(sims):.3f}")

    vetoed = sum(s.conflict for s in scored)
    print(
        f"\nvalue_conflict vetoes {vetoed} pairs: {sum(s.conflict and not s.duplicate for s in scored)} "
        f"non-duplicates, {sum(s.conflict and s.duplicate for s in scored)} duplicates"
    )
    for veto in (False, True):
        label = "cosine + value_conflict veto (the gate's rule)" if veto else "cosine alone"
        results = sweep(scored, veto=veto)
        print(f"\n{label}\nthreshold  precision  recall    f1     tp  fp  fn  tn")
        for m in results:
            print(
                f"  {m.threshold:.2f}      {m.precision:.3f}    {m.recall:.3f}  {m.f1:.3f}  "
                f"{m.tp:3d} {m.fp:3d} {m.fn:3d} {m.tn:3d}"
            )
        best = best_recall(results, args.min_precision)
        if best is None:
            print(f"{label}: no threshold reaches precision {args.min_precision}")
        else:
            print(
                f"{label}: best recall at precision >= {args.min_precision}: {best.threshold:.2f}  "
                f"P={best.precision:.3f} R={best.recall:.3f} F1={best.f1:.3f}"
            )
        recommended = choose(results, args.margin)
        if recommended is None:
            print(f"{label}: every threshold calls some non-duplicate a duplicate")
        else:
            m = metrics_at(scored, recommended, veto=veto)
            print(
                f"{label}: RECOMMENDED {recommended:.2f} (no false duplicate above {recommended - args.margin:.2f}, "
                f"+{args.margin} margin)  P={m.precision:.3f} R={m.recall:.3f} F1={m.f1:.3f}"
            )
    current = metrics_at(scored, DEDUPE_THRESHOLD)
    print(
        f"\nconfigured DEDUPE_THRESHOLD={DEDUPE_THRESHOLD:.2f} with the veto: "
        f"P={current.precision:.3f} R={current.recall:.3f} F1={current.f1:.3f}"
    )
    missed = [s for s in scored if not s.duplicate and is_duplicate(s.similarity, value_conflict=s.conflict)]
    print(
        "false duplicates at the configured threshold (kind, similarity):",
        [(s.kind, round(s.similarity, 3)) for s in missed],
    )
    if args.publish:
        report.publish("dedupe_eval", markdown(scored, args.pairs, args.min_precision, args.margin))


if __name__ == "__main__":
    main()
