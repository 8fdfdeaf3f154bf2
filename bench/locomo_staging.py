"""How many LoCoMo turns the write gate stages (PENDING), and why: the detectors and the gate alone.

    nice -n 10 .venv/bin/python -m bench.locomo_staging [--data ../shared/bench/locomo10.json] [--json]

Every turn of the 10 conversations is screened as `bench.locomo` writes it through the API (content
"speaker: text [image: caption]", type episodic, source_kind user, reason user_stated_fact,
importance 0.8, provenance session / turn / speaker screened as free-text fields) and decided by
`policy.gate.decide` with nothing near it: no store, no index, no Temporal, so it runs in seconds on
one core. Dedupe (NOOP) needs the index and is left out; a turn that would be a NOOP through the API
is counted here by what the gate decides before dedupe. The staged share is what a person would be
asked to confirm when an agent records their conversations.

The data file is read from ../shared/bench/ and never copied into the project.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memwarden import detect  # noqa: E402
from memwarden.policy.gate import GateInput, decide  # noqa: E402
from memwarden.records import Decision, MemoryType, SourceKind, WriteReason  # noqa: E402

DEFAULT_DATA = ROOT.parents[1] / "shared" / "bench" / "locomo10.json"


def turns(path: Path) -> list[tuple[str, dict[str, str]]]:
    """(content, free-text fields) per turn, in conversation order, as bench.locomo sends them."""
    out = []
    for sample in json.loads(path.read_text()):
        talk = sample["conversation"]
        for key in sorted((k for k in talk if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            for t in talk[key]:
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" [image: {t['blip_caption']}]"
                out.append(
                    (
                        text,
                        {"provenance.session": key, "provenance.turn": t["dia_id"], "provenance.speaker": t["speaker"]},
                    )
                )
    return out


def classify(content: str, fields: dict[str, str]) -> tuple[Decision, str]:
    try:
        screening = detect.screen(content, source_kind=SourceKind.USER, fields=fields)
    except TypeError:  # a checkout from before free-text fields were screened: the same measure, for comparison
        screening = detect.screen(content, source_kind=SourceKind.USER)
    decision = decide(
        GateInput(
            type=MemoryType.EPISODIC,
            source_kind=SourceKind.USER,
            reason=WriteReason.USER_STATED_FACT,
            content_chars=len(content),
            importance=0.8,
            screening=screening,
        )
    )
    return decision.decision, decision.reason.value


def run(path: Path) -> dict[str, Any]:
    detect.warm_up()
    data = turns(path)
    decisions: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    cpu = time.process_time()
    for content, fields in data:
        decision, reason = classify(content, fields)
        decisions[decision.value] += 1
        reasons[f"{decision.value} {reason}"] += 1
    staged = decisions[Decision.PENDING.value]
    return {
        "turns": len(data),
        "staged": staged,
        "staged_share": staged / len(data) if data else 0.0,
        "decisions": dict(decisions.most_common()),
        "reasons": dict(reasons.most_common()),
        "cpu_s": round(time.process_time() - cpu, 2),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| LoCoMo turns | staged (PENDING) | share | rejected | CPU |",
        "| --- | --- | --- | --- | --- |",
        f"| {report['turns']} | {report['staged']} | {report['staged_share']:.1%} | "
        f"{report['decisions'].get('REJECT', 0)} | {report['cpu_s']} s |",
        "",
        "| decision and reason | turns |",
        "| --- | --- |",
    ]
    lines += [f"| {reason} | {n} |" for reason, n in report["reasons"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.data)
    print(json.dumps(report, indent=2) if args.json else markdown(report))


if __name__ == "__main__":
    main()
