"""Precision / recall of the rule-based extractor on a labelled set, and its reach on LoCoMo's evidence turns.

    .venv/bin/python -m bench.extract_eval [--errors] [--json] [--publish] [--locomo ../shared/bench/locomo10.json]

The labelled set (bench/data/extract_*.jsonl, written for this project) is one message per line with what
a careful human would write down from it: per note its memory type and lifetime (`durable`, `task`,
`deadline`, `episode`), the slot when the attribute holds one value, `kind` for corrections and task
guidance, and `source_kind` for the assistant's and tools' turns. A message can hold several notes or
none (questions, requests, small talk, reported speech, hypotheticals, failed tool output, system prompts).

- `extract_holdout.jsonl` was written before the rules were run on anything and never tuned on: its
  figure is the honest one. Its first look is recorded in `FIRST_LOOK` and printed beside today's.
- `extract_dev.jsonl` was written with it, and the rules were then tuned on dev only.
- `extract_holdout2.jsonl` was written after that tuning, as a second look at unanticipated phrasings, and
  measured once; it is never tuned on either.

A proposal matches a note of the same message with the same type, lifetime and source kind (greedy, one
to one); slot and kind agreement are reported over the matched notes that name one.

LoCoMo (read from ../shared/bench/, never copied): every turn of the ten conversations goes through the
extractor as a person's message; the figure is the share of evidence turns (those questions of categories
1-4 cite) from which it proposes at least one note, beside the same share for the turns no question
cites. It says how much of what the questions ask about the extractor would have handed to the gate.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import report as published  # noqa: E402
from memwarden.extract.base import Message, Proposal  # noqa: E402
from memwarden.extract.rules import RuleExtractor  # noqa: E402
from memwarden.records import MessageRole  # noqa: E402

DATA = ROOT / "bench" / "data"
SPLITS = ("dev", "holdout", "holdout2")
REFERENCE_TIME = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
"""Every labelled message is read as sent at this time (the dates in it resolve against it)."""
DEFAULT_LOCOMO = ROOT.parent / "shared" / "bench" / "locomo10.json"
FIRST_LOOK = {
    "dev": {"precision": 0.95, "recall": 0.87},
    "holdout": {"precision": 0.97, "recall": 0.67},
    "holdout2": {"precision": 0.95, "recall": 0.65},
}
"""Each split the first time the rules ran on it, before any tuning (the held-out split is never tuned on)."""


def load(split: str) -> list[dict[str, Any]]:
    with (DATA / f"extract_{split}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _source(row: dict[str, Any], note: dict[str, Any]) -> str:
    default = {"user": "user", "assistant": "model", "tool": "tool", "system": "system"}[row["role"]]
    return str(note.get("source_kind", default))


def _key(note_type: str, lifetime: str, source: str) -> tuple[str, str, str]:
    return note_type, lifetime, source


def score(rows: list[dict[str, Any]], extractor: RuleExtractor) -> dict[str, Any]:
    tp = fp = fn = 0
    slot_named = slot_right = kind_named = kind_right = 0
    errors: list[dict[str, Any]] = []
    by_type: Counter[str] = Counter()
    by_type_found: Counter[str] = Counter()
    for row in rows:
        message = Message(role=MessageRole(row["role"]), content=row["text"])
        proposals = extractor.extract_sync([message], REFERENCE_TIME)
        left: list[Proposal] = list(proposals)
        for note in row["expected"]:
            by_type[note["type"]] += 1
            want = _key(note["type"], note["lifetime"], _source(row, note))
            match = next((p for p in left if _key(p.type.value, p.lifetime.value, p.source_kind.value) == want), None)
            if match is None:
                fn += 1
                errors.append({"id": row["id"], "missed": note, "got": [_brief(p) for p in proposals]})
                continue
            left.remove(match)
            tp += 1
            by_type_found[note["type"]] += 1
            if "slot" in note:
                slot_named += 1
                slot_right += match.slot == note["slot"]
                if match.slot != note["slot"]:
                    errors.append({"id": row["id"], "slot": note["slot"], "got": match.slot})
            if "kind" in note:
                kind_named += 1
                kind_right += match.kind.value == note["kind"]
                if match.kind.value != note["kind"]:
                    errors.append({"id": row["id"], "kind": note["kind"], "got": match.kind.value})
        for extra in left:
            fp += 1
            errors.append({"id": row["id"], "extra": _brief(extra), "expected": row["expected"]})
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {
        "messages": len(rows),
        "notes": tp + fn,
        "negatives": sum(1 for r in rows if not r["expected"]),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "slot_accuracy": slot_right / slot_named if slot_named else 1.0,
        "slot_named": slot_named,
        "kind_accuracy": kind_right / kind_named if kind_named else 1.0,
        "kind_named": kind_named,
        "recall_by_type": {t: (by_type_found[t], n) for t, n in sorted(by_type.items())},
        "errors": errors,
    }


def _brief(p: Proposal) -> dict[str, Any]:
    return {"type": p.type.value, "lifetime": p.lifetime.value, "slot": p.slot, "kind": p.kind.value}


_DIA = re.compile(r"D\d+:\d+")


def locomo(path: Path, extractor: RuleExtractor) -> dict[str, Any] | None:
    """Share of evidence turns (categories 1-4) the extractor proposes at least one note from."""
    if not path.exists():
        return None
    samples = json.loads(path.read_text(encoding="utf-8"))
    evidence_hit = evidence_n = other_hit = other_n = proposals = 0
    by_category: dict[int, list[int]] = {}
    for sample in samples:
        conversation = sample["conversation"]
        turns: dict[str, str] = {}
        for key, value in conversation.items():
            if key.startswith("session_") and isinstance(value, list):
                for turn in value:
                    text = turn.get("text", "")
                    if text:
                        turns[turn["dia_id"]] = text
        cited: dict[str, set[int]] = {}
        for qa in sample["qa"]:
            category = int(qa.get("category", 0))
            if category not in (1, 2, 3, 4):
                continue
            for raw in qa.get("evidence", []):
                for dia in _DIA.findall(str(raw)):
                    if dia in turns:
                        cited.setdefault(dia, set()).add(category)
        for dia, text in turns.items():
            found = extractor.extract_sync([Message(role=MessageRole.USER, content=text)], REFERENCE_TIME)
            proposals += len(found)
            if dia in cited:
                evidence_n += 1
                evidence_hit += bool(found)
                for category in cited[dia]:
                    hit_n = by_category.setdefault(category, [0, 0])
                    hit_n[0] += bool(found)
                    hit_n[1] += 1
            else:
                other_n += 1
                other_hit += bool(found)
    return {
        "evidence_turns": evidence_n,
        "evidence_proposed": evidence_hit,
        "other_turns": other_n,
        "other_proposed": other_hit,
        "proposals": proposals,
        "by_category": {c: tuple(v) for c, v in sorted(by_category.items())},
    }


def evaluate(locomo_path: Path | None) -> dict[str, Any]:
    extractor = RuleExtractor()
    report: dict[str, Any] = {split: score(load(split), extractor) for split in SPLITS}
    report["locomo"] = locomo(locomo_path, extractor) if locomo_path is not None else None
    return report


def markdown(report: dict[str, Any], *, errors: bool = False) -> str:
    out: list[str] = []
    rows = []
    for split in SPLITS:
        r = report[split]
        first = FIRST_LOOK[split]
        rows.append(
            [
                split,
                r["messages"],
                r["negatives"],
                r["notes"],
                f"{r['precision']:.2f}",
                f"{r['recall']:.2f}",
                f"{r['f1']:.2f}",
                f"{first['precision']:.2f} / {first['recall']:.2f}",
                f"{r['slot_accuracy']:.2f} ({r['slot_named']})",
                f"{r['kind_accuracy']:.2f} ({r['kind_named']})",
            ]
        )
    out.append(
        "**Rule-based extractor (`rules-v1`) on the labelled set** (bench/data/extract_*.jsonl; a match is the "
        "same message, type, lifetime and source kind; the held-out splits were never tuned on)\n"
    )
    out.append(
        published.table(
            [
                "split",
                "messages",
                "with nothing to note",
                "notes",
                "precision",
                "recall",
                "F1",
                "first look P / R",
                "slot right (named)",
                "kind right (named)",
            ],
            rows,
        )
    )
    out.append("")
    types = sorted({t for split in SPLITS for t in report[split]["recall_by_type"]})
    rows = []
    for t in types:
        cells: list[object] = [t]
        for split in SPLITS:
            found, n = report[split]["recall_by_type"].get(t, (0, 0))
            cells.append(f"{found}/{n}")
        rows.append(cells)
    out.append(published.table(["recall by type", *SPLITS], rows))
    out.append("")
    lo = report.get("locomo")
    if lo:
        out.append(
            "**LoCoMo evidence turns** (every turn of the ten conversations read as a person's message; "
            "a turn counts when the extractor proposes at least one note from it)\n"
        )
        rows = [
            [
                "evidence turns (categories 1-4)",
                f"{lo['evidence_proposed']}/{lo['evidence_turns']}",
                f"{lo['evidence_proposed'] / lo['evidence_turns']:.1%}",
            ],
            [
                "turns no question cites",
                f"{lo['other_proposed']}/{lo['other_turns']}",
                f"{lo['other_proposed'] / lo['other_turns']:.1%}",
            ],
        ]
        for category, (hit, n) in lo["by_category"].items():
            rows.append([f"evidence of category {category}", f"{hit}/{n}", f"{hit / n:.1%}"])
        out.append(published.table(["turns", "proposed from", "share"], rows))
        out.append("")
    if errors:
        for split in SPLITS:
            out.append(f"### {split} errors\n")
            for e in report[split]["errors"]:
                out.append(f"- {json.dumps(e)}")
            out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list misses, extras and wrong slots")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo's locomo10.json")
    parser.add_argument("--no-locomo", action="store_true")
    args = parser.parse_args()
    report = evaluate(None if args.no_locomo else args.locomo)
    if args.publish:
        published.publish("extract_eval", markdown(report))
    if args.json:
        for split in SPLITS:
            report[split].pop("errors", None)
        print(json.dumps(report, indent=2, default=str))
        return
    print(markdown(report, errors=args.errors))


if __name__ == "__main__":
    main()
