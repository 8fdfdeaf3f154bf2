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

DATA = ROOT / "tests" / "data"
FIRST_LOOK = {"holdout": (1.0, 0.633), "holdout2": (0.938, 0.429), "holdout3": (1.0, 0.257), "holdout4": (1.0, 0.375)}
"""(precision, recall) of each held-out injection split the first time it was run, before any tuning on it."""
FIRST_LOOK_OTHER = {"secrets holdout": (1.0, 0.600), "pii holdout": (0.944, 0.850)}
"""The same for the secrets and PII held-out splits (then used to close format gaps: none is untouched)."""


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


def latency(samples: list[str], repeats: int = 3) -> dict[str, float]:
    timings = []
    for r in range(repeats):
        for i, text in enumerate(samples):
            candidate = f"{text} ({r}.{i})"  # defeat caches: every call screens a new string
            start = time.perf_counter()
            screen(candidate, source_kind="tool")
            timings.append((time.perf_counter() - start) * 1000)
    timings.sort()
    return {"p50_ms": statistics.median(timings), "p95_ms": timings[int(0.95 * (len(timings) - 1))], "n": len(timings)}


TYPICAL = (
    "The user said their favourite restaurant is Luigi's on the corner, they prefer window seats, and their "
    "manager Sam approves travel. Meeting moved to Thursday 3pm; call back at 415-555-0132."
)


def markdown(report: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: precision and recall per detector and split, then latency."""
    rows = []
    for title, key, first_looks in (
        ("instruction-like", "injection", FIRST_LOOK),
        ("secrets", "secrets", {k.split()[1]: v for k, v in FIRST_LOOK_OTHER.items() if k.startswith("secrets")}),
        ("PII", "pii", {k.split()[1]: v for k, v in FIRST_LOOK_OTHER.items() if k.startswith("pii")}),
    ):
        for split, r in report[key].items():
            first = first_looks.get(split)
            note = f"first look P {first[0]:.3f}, R {first[1]:.3f}" if first else ""
            if split == "holdout4":
                note = f"never tuned on; {note}" if note else "never tuned on"
            rows.append([title, split, r["n"], f"{r['precision']:.3f}", f"{r['recall']:.3f}", note])
    c = report["pii_categories"]
    rows.append(["PII categories (micro)", "all", "", f"{c['precision']:.3f}", f"{c['recall']:.3f}", ""])
    t, a = report["latency_typical_200_chars"], report["latency_labelled_texts"]
    return "\n\n".join(
        [
            published.table(["detector", "set", "n", "precision", "recall", "note"], rows),
            f"`screen()` p50 {t['p50_ms']:.2f} ms, p95 {t['p95_ms']:.2f} ms on a typical {len(TYPICAL)}-character "
            f"candidate; p50 {a['p50_ms']:.2f} ms, p95 {a['p95_ms']:.2f} ms over the labelled texts (n={a['n']}); "
            f"`warm_up()` {report['warm_up_s']:.2f} s.",
        ]
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
    if args.publish:
        published.publish("detect_eval", markdown(report))

    if args.json:
        for section in (report["injection"].values(), report["secrets"].values(), report["pii"].values()):
            for r in section:
                r.pop("errors", None)
        print(json.dumps(report, indent=2))
        return

    def line(name: str, r: dict[str, Any], note: str = "") -> None:
        print(f"  {name:<24} n={r['n']:<4} precision={r['precision']:.3f} recall={r['recall']:.3f}"
              f"  (tp={r['tp']} fp={r['fp']} fn={r['fn']}){note}")  # fmt: skip
        if args.errors:
            for kind, text in r["errors"]:
                print(f"      {kind}: {text[:110]!r}")

    print("instruction-like (injection_labelled.jsonl)")
    for split, r in report["injection"].items():
        first = FIRST_LOOK.get(split)
        note = f"   first look: P={first[0]:.3f} R={first[1]:.3f}" if first else ""
        if split == "holdout4":
            note += "   <- never tuned on"
        line(split, r, note)
    for title, key in (("secrets (secrets_labelled.jsonl)", "secrets"), ("PII, any type (pii_labelled.jsonl)", "pii")):
        print(title)
        for split, r in report[key].items():
            first = FIRST_LOOK_OTHER.get(f"{key} {split}")
            line(split, r, f"   first look: P={first[0]:.3f} R={first[1]:.3f}" if first else "")
    c = report["pii_categories"]
    print(f"  {'categories (micro)':<24} precision={c['precision']:.3f} recall={c['recall']:.3f}")
    t, a = report["latency_typical_200_chars"], report["latency_labelled_texts"]
    print(f"screen() latency, typical {len(TYPICAL)}-char candidate: p50={t['p50_ms']:.2f} ms p95={t['p95_ms']:.2f} ms")
    print(f"screen() latency, labelled texts: p50={a['p50_ms']:.2f} ms p95={a['p95_ms']:.2f} ms (n={a['n']})")
    print(f"warm_up(): {warm_s:.2f} s")


if __name__ == "__main__":
    main()
