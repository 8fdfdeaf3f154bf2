"""Screenings in several threads at once answer as they do one by one.

Concurrent proposals (local activities) and a bulk import's batch screen in worker threads that share
the detectors; a recognizer that kept the text it was reading in an attribute failed under that
(`detector pii failed (AttributeError)`). Synthetic texts with IP addresses, e-mail and phone numbers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from memwarden import detect

TEXTS = [
    f"Locker {n} is in row {n % 7}; the printer is at 10.0.{n}.1, mail desk{n}@example.com, call +44 20 7946 09{n % 10}"
    for n in range(1, 31)
] * 4


def test_screenings_in_threads_answer_as_one_by_one() -> None:
    detect.warm_up()
    alone = [detect.screen(text, source_kind="user") for text in TEXTS]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda text: detect.screen(text, source_kind="user"), TEXTS))
    assert together == alone
    assert all("ip_address" in s.pii or "email" in s.pii for s in alone)
