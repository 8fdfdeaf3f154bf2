"""Precision / recall of memwarden.detect on the labelled sets in tests/data, plus screening latency.

    .venv/bin/python -m bench.detect_eval [--errors] [--json] [--publish]

Sets (all synthetic, written for this project; no third-party corpus, so no licence to track):
- injection_labelled.jsonl: instruction-like (1) vs benign look-alike observations (0), in splits.
  `dev` was written first and the detector tuned on it; `holdout`, `holdout2`, `holdout3` were each
  written before being run, measured once, and then used for tuning (their first-look numbers are
  recorded in the report below); `holdout4` was written last and never tuned on: it is the honest
  estimate of how the detector does on phrasings nobody anticipated.
- secrets_labelled.jsonl: a secret or credential (1) vs ordinary text, ids and hashes (0).
- pii_labelled.jsonl: PII as docs/decisions/pii-redact-or-reject.md defines it (1, with expected
  categories) vs cities, employers, preferences and number-like non-PII (0).
  Both have a `dev` split (written with the detectors) and a `holdout` split written later and measured
  once (first-look numbers below), then used to close the format gaps it exposed.
- injection_corpus.jsonl (issue 21): 162 injections in eight families and 105 benign look-alikes (facts
  from tools, people's habits, numbers that are not secrets), run through the detectors *and the gate*
  for every source kind. An injection is held when a tool, document or model source gets REJECT
  untrusted_instruction, and a user, app or system source gets PENDING for its owner (or a never-store
  REJECT); a benign text is rejected when the gate answers REJECT for any reason. Written before the
  detectors were tuned on it; first look below.
- injection_directions.jsonl (issue 21): 66 statements labelled durable direction / task guidance /
  habit / fact, through the gate as a user's preference: durable ones must be staged, task guidance kept
  as a task memory, habits and facts added.

Prints markdown tables (the benchmark document is written from them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import report as published  # noqa: E402
from memwarden.detect import assess, find_secrets, pii_codes, screen, warm_up  # noqa: E402
from memwarden.policy.gate import Confirmer, GateDecision, GateInput, GateReason, decide  # noqa: E402
from memwarden.records import Decision, MemoryType, SourceKind, WriteReason  # noqa: E402

DATA = ROOT / "tests" / "data"
FIRST_LOOK = {"holdout": (1.0, 0.633), "holdout2": (0.938, 0.429), "holdout3": (1.0, 0.257), "holdout4": (1.0, 0.375)}
"""(precision, recall) of each held-out injection split the first time it was run, before any tuning on it."""
FIRST_LOOK_OTHER = {"secrets holdout": (1.0, 0.600), "pii holdout": (0.944, 0.850)}
"""The same for the secrets and PII held-out splits (then used to close format gaps: none is untouched)."""
CORPUS_FIRST_LOOK = {"tool": (60, 162), "user": (23, 162), "benign rejected": (1, 105)}
"""injection_corpus.jsonl on the detectors and gate it was written against, before any tuning on it."""
DIRECTIONS_FIRST_LOOK = {"durable staged": (19, 28), "habits staged": (11, 14)}

UNTRUSTED = (SourceKind.TOOL, SourceKind.DOCUMENT, SourceKind.MODEL)
_REASONS = {
    SourceKind.USER: WriteReason.USER_STATED_FACT,
    SourceKind.APP: WriteReason.APP_OBSERVATION,
    SourceKind.SYSTEM: WriteReason.APP_OBSERVATION,
    SourceKind.TOOL: WriteReason.TOOL_OBSERVATION_UNVERIFIED,
    SourceKind.MODEL: WriteReason.USER_STATED_FACT,
    SourceKind.DOCUMENT: WriteReason.USER_STATED_FACT,
}


def load(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def prf(rows: Iterable[dict[str, Any]], predict: Callable[[str], bool]) -> dict[str, Any]:
    tp = fp = fn = tn = 0
    errors = []
    for row in rows:
        got = predict(row["text"])
        want = bool(row["label"])
        if got and want:
            tp += 1
        elif got:
            fp += 1
            errors.append(("FP", row["text"]))
        elif want:
            fn += 1
            errors.append(("FN", row["text"]))
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"n": tp + fp + fn + tn, "tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": precision, "recall": recall,
            "errors": errors}  # fmt: skip


def category_prf(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Micro-averaged over (row, category) pairs: is each expected PII type reported, and nothing else?"""
    tp = fp = fn = 0
    for row in rows:
        got, want = set(pii_codes(row["text"])), set(row.get("pii", []))
        tp += len(got & want)
        fp += len(got - want)
        fn += len(want - got)
    return {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}


def evaluate() -> dict[str, Any]:
    inj = load("injection_labelled.jsonl")
    injection: dict[str, Any] = {}
    is_injection = lambda t: assess(t).instruction_like  # noqa: E731
    for split in sorted({r["split"] for r in inj}):
        injection[split] = prf([r for r in inj if r["split"] == split], is_injection)
    injection["tuned (dev+holdout1-3)"] = prf([r for r in inj if r["split"] != "holdout4"], is_injection)
    injection["all"] = prf(inj, is_injection)
    secrets = load("secrets_labelled.jsonl")
    pii = load("pii_labelled.jsonl")
    has_secret = lambda t: bool(find_secrets(t))  # noqa: E731
    has_pii = lambda t: bool(pii_codes(t))  # noqa: E731
    return {
        "injection": injection,
        "secrets": {split: prf([r for r in secrets if r["split"] == split], has_secret) for split in ("dev", "holdout")}
        | {"all": prf(secrets, has_secret)},
        "pii": {split: prf([r for r in pii if r["split"] == split], has_pii) for split in ("dev", "holdout")}
        | {"all": prf(pii, has_pii)},
        "pii_categories": category_prf(pii),
    }


def gate_text(content: str, source: SourceKind, memory_type: MemoryType = MemoryType.FACT) -> GateDecision:
    """Content through the detectors and the gate as the Remember activity runs them, with nothing near."""
    preference = memory_type is MemoryType.PREFERENCE and source is SourceKind.USER
    return decide(
        GateInput(
            type=memory_type,
            source_kind=source,
            reason=WriteReason.USER_EXPLICIT_PREFERENCE if preference else _REASONS[source],
            content_chars=len(content),
            screening=screen(content, source_kind=source),
            has_source_ref=source is SourceKind.SYSTEM,
            confirm_requested=source is SourceKind.MODEL,
        )
    )


def held(result: GateDecision, source: SourceKind) -> bool:
    if source in UNTRUSTED:
        return (result.decision, result.reason) == (Decision.REJECT, GateReason.UNTRUSTED_INSTRUCTION)
    if result.decision is Decision.PENDING:
        return result.confirm_by is Confirmer.OWNER
    return result.decision is Decision.REJECT and result.reason in (GateReason.SECRET_DETECTED, GateReason.PII_DETECTED)


def corpus() -> dict[str, Any]:
    """The issue-21 corpus per source kind, by family; benign rejections; the directions set."""
    rows = load("injection_corpus.jsonl")
    injections = [r for r in rows if r["label"] == "injection"]
    benign = [r for r in rows if r["label"] == "benign"]
    by_source: dict[str, dict[str, Any]] = {}
    for source in SourceKind:
        missed = [r for r in injections if not held(gate_text(r["text"], source), source)]
        by_source[source.value] = {"held": len(injections) - len(missed), "n": len(injections),
                                   "missed": [r["text"] for r in missed]}  # fmt: skip
    families: dict[str, list[int]] = {}
    for r in injections:
        counts = families.setdefault(r["family"], [0, 0])
        counts[0] += held(gate_text(r["text"], SourceKind.TOOL), SourceKind.TOOL)
        counts[1] += 1
    benign_out: dict[str, Any] = {}
    for name, pick in (
        ("own source", lambda r: SourceKind(r["source_kind"])),
        ("as a tool", lambda r: SourceKind.TOOL),
    ):
        rejected = [r["text"] for r in benign if gate_text(r["text"], pick(r)).decision is Decision.REJECT]
        benign_out[name] = {"rejected": len(rejected), "n": len(benign), "texts": rejected}
    expected = {"durable": (Decision.PENDING, GateReason.STAGED_BEHAVIOUR_CHANGE),
                "task": (Decision.ADD, GateReason.TASK_SCOPED), "habit": (Decision.ADD, GateReason.ACCEPTED),
                "fact": (Decision.ADD, GateReason.ACCEPTED)}  # fmt: skip
    directions: dict[str, list[int]] = {}
    for r in load("injection_directions.jsonl"):
        got = gate_text(r["text"], SourceKind.USER, MemoryType.PREFERENCE)
        counts = directions.setdefault(r["label"], [0, 0])
        counts[0] += (got.decision, got.reason) == expected[r["label"]]
        counts[1] += 1
    return {"sources": by_source, "families": families, "benign": benign_out, "directions": directions}


def worst_case_ms() -> dict[str, float]:
    """`assess` and `screen` at the maximum content size, on the shapes that were slowest (thread CPU time,
    best of three, each call from cold per-text caches as a new candidate's text finds them)."""
    from memwarden.config import Settings

    n = Settings().max_content_chars

    def run(unit: str) -> str:
        return (unit * (n // len(unit) + 1))[:n]

    units = ["a-", "a ", "a.", "a\n", "a:", "<!--", "the user ", "send ", "/", "/1", "1.", "12.", "1-", "ignore "]
    shapes = {"newlines then '!'": "\n" * (n - 1) + "!"} | {f"{u!r} repeated": run(u) for u in units}
    out = {}
    for name, text in shapes.items():
        for label, fn in (
            ("assess", lambda t: assess(t)),
            ("screen", lambda t: screen(t, source_kind="tool", budget_s=60)),
        ):
            best = min(_cold_thread_ms(fn, text) for _ in range(3))
            out[f"{label}: {name}"] = best
    return out


def _cold_thread_ms(fn: Callable[[str], object], text: str) -> float:
    from memwarden.detect import _prefilter, _text, pii

    for cached in (_text.normalise, _text.normalise_spaced, _prefilter.grams, _prefilter._folded, pii._is_global_ip):
        cached.cache_clear()
    return _thread_ms(fn, text)


def _thread_ms(fn: Callable[[str], object], text: str) -> float:
    start = time.thread_time()
    fn(text)
    return (time.thread_time() - start) * 1000


def latency(samples: list[str], repeats: int = 3) -> dict[str, float]:
    """Per screening, this thread's CPU time: the detectors are single-threaded CPU work, so on a quiet
    machine it is the wall time, and on a shared one it is not inflated by the neighbours' load."""
    timings = []
    for r in range(repeats):
        for i, text in enumerate(samples):
            candidate = f"{text} ({r}.{i})"  # defeat caches: every call screens a new string
            start = time.thread_time()
            screen(candidate, source_kind="tool")
            timings.append((time.thread_time() - start) * 1000)
    timings.sort()
    return {"p50_ms": statistics.median(timings), "p95_ms": timings[int(0.95 * (len(timings) - 1))], "n": len(timings)}


TYPICAL = (
    "The user said their favourite restaurant is Luigi's on the corner, they prefer window seats, and their "
    "manager Sam approves travel. Meeting moved to Thursday 3pm; call back at 415-555-0132."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list false positives / negatives")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()

    start = time.perf_counter()
    warm_up()
    warm_s = time.perf_counter() - start
    report = evaluate()
    all_texts = [r["text"] for name in ("injection", "secrets", "pii") for r in load(f"{name}_labelled.jsonl")]
    report["latency_typical_200_chars"] = latency([TYPICAL] * 300, repeats=1)
    report["latency_labelled_texts"] = latency(all_texts, repeats=2)
    report["warm_up_s"] = warm_s
    report["corpus"] = corpus()
    report["worst_case_ms"] = worst_case_ms()
    if args.publish:
        published.publish("detect_eval", markdown(report))

    if args.json:
        for section in (report["injection"].values(), report["secrets"].values(), report["pii"].values()):
            for r in section:
                r.pop("errors", None)
        print(json.dumps(report, indent=2))
        return
    print(markdown(report, errors=args.errors))


def markdown(report: dict[str, Any], *, errors: bool = False) -> str:
    """The report as markdown tables."""
    out: list[str] = []

    def table(header: list[str], rows: list[list[str]]) -> None:
        out.append(published.table(header, rows))
        out.append("")

    c = report["corpus"]
    out.append(
        "**Injection corpus through the detectors and the gate** (injection_corpus.jsonl; held = REJECT "
        "untrusted_instruction from tool/document/model, PENDING for the owner from user/app/system)\n"
    )
    first = {"tool": CORPUS_FIRST_LOOK["tool"], "user": CORPUS_FIRST_LOOK["user"]}
    rows = []
    for src, v in c["sources"].items():
        seen = f"{first[src][0]}/{first[src][1]}" if src in first else ""
        rows.append([src, f"{v['held']}/{v['n']}", f"{v['held'] / v['n']:.1%}", seen])
    table(["source", "injections held", "share", "first look"], rows)
    table(["family (from a tool)", "held"], [[fam, f"{h}/{n}"] for fam, (h, n) in sorted(c["families"].items())])
    fb = CORPUS_FIRST_LOOK["benign rejected"]
    rows = []
    for name, v in c["benign"].items():
        seen = f"{fb[0]}/{fb[1]}" if name == "own source" else ""
        rows.append([name, f"{v['rejected']}/{v['n']}", f"{v['rejected'] / v['n']:.1%}", seen])
    table(["benign look-alikes", "rejected", "share", "first look"], rows)
    table(["directions set (as a user's preference)", "as expected"],
          [[label, f"{h}/{n}"] for label, (h, n) in c["directions"].items()])  # fmt: skip
    if errors:
        for src, v in c["sources"].items():
            out.extend(f"- missed from {src}: {t[:100]!r}" for t in v["missed"])
        for name, v in c["benign"].items():
            out.extend(f"- benign rejected ({name}): {t[:100]!r}" for t in v["texts"])
        out.append("")

    rows = []
    for split, r in report["injection"].items():
        first_look = FIRST_LOOK.get(split)
        note = f"P={first_look[0]:.3f} R={first_look[1]:.3f}" if first_look else ""
        rows.append([f"instructions {split}" + (" (never tuned on)" if split == "holdout4" else ""), str(r["n"]),
                     f"{r['precision']:.3f}", f"{r['recall']:.3f}", note])  # fmt: skip
    for key in ("secrets", "pii"):
        for split, r in report[key].items():
            first_look = FIRST_LOOK_OTHER.get(f"{key} {split}")
            note = f"P={first_look[0]:.3f} R={first_look[1]:.3f}" if first_look else ""
            rows.append([f"{key} {split}", str(r["n"]), f"{r['precision']:.3f}", f"{r['recall']:.3f}", note])
    table(["labelled set", "n", "precision", "recall", "first look"], rows)
    if errors:
        for section in ("injection", "secrets", "pii"):
            for split, r in report[section].items():
                out.extend(f"- {section} {split} {kind}: {text[:100]!r}" for kind, text in r["errors"])
        out.append("")

    t, a = report["latency_typical_200_chars"], report["latency_labelled_texts"]
    table(["screen() latency (thread CPU)", "p50 ms", "p95 ms"],
          [[f"typical {len(TYPICAL)}-char candidate", f"{t['p50_ms']:.2f}", f"{t['p95_ms']:.2f}"],
           [f"labelled texts (n={a['n']})", f"{a['p50_ms']:.2f}", f"{a['p95_ms']:.2f}"]])  # fmt: skip
    table(["worst case at the maximum content size", "CPU ms"],
          [[name, f"{ms:.1f}"] for name, ms in report["worst_case_ms"].items()])  # fmt: skip
    out.append(f"warm_up(): {report['warm_up_s']:.2f} s")
    return "\n".join(out)


if __name__ == "__main__":
    main()
