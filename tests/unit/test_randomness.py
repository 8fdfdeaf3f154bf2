"""The random pool: OS bytes fetched a block at a time, each handed out once, never again after a fork."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from memwarden import randomness
from memwarden.randomness import RandomPool
from memwarden.temporal.codec import NONCE_BYTES, AesGcmCodec


def _count_urandom(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes asked of os.urandom from now on (the real bytes are still returned)."""
    calls: list[int] = []
    real = os.urandom

    def counted(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(os, "urandom", counted)
    return calls


def test_one_syscall_serves_many_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_urandom(monkeypatch)
    pool = RandomPool(block=4096)
    drawn = [pool.take(12) for _ in range(341)]  # 341 x 12 = 4092 bytes: one block
    assert calls == [4096]
    assert len(set(drawn)) == len(drawn) and all(len(d) == 12 for d in drawn)
    pool.take(12)  # the block is spent: the next draw refills
    assert calls == [4096, 4096]


def test_draws_are_the_os_bytes_in_order_without_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    block = bytes(range(64))
    monkeypatch.setattr(os, "urandom", lambda n: block[:n])
    pool = RandomPool(block=64)
    assert pool.take(10) + pool.take(20) + pool.take(34) == block


def test_a_draw_larger_than_a_block_goes_to_the_os() -> None:
    pool = RandomPool(block=32)
    assert len(pool.take(100)) == 100
    assert pool.take(0) == b""
    with pytest.raises(ValueError):
        pool.take(-1)
    with pytest.raises(ValueError):
        RandomPool(block=8)


def test_uuid4_is_a_version_4_uuid() -> None:
    made = {randomness.uuid4() for _ in range(2000)}
    assert len(made) == 2000
    for u in made:
        assert u.version == 4 and u.variant == uuid.RFC_4122
        assert uuid.UUID(str(u)) == u


def test_threads_never_get_the_same_bytes() -> None:
    pool = RandomPool(block=256)  # small blocks: many refills while threads race
    seen: list[bytes] = []
    lock = threading.Lock()

    def draw() -> None:
        mine = [pool.take(16) for _ in range(2000)]
        with lock:
            seen.extend(mine)

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8000 and len(set(seen)) == 8000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_hand_out_its_parents_buffered_bytes() -> None:
    randomness.token_bytes(1)  # the process pool now holds a block in memory
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next draw, then leave at once
        try:
            os.write(write, randomness.token_bytes(16))
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    parent = randomness.token_bytes(16)  # what the parent's buffer held next
    assert len(child) == 16 and child != parent


def test_a_pool_copied_into_another_process_refills_before_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_urandom(monkeypatch)
    pool = RandomPool(block=64)
    pool.take(8)
    assert calls == [64]
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as a forked child sees it, without the fork hook
    pool.take(8)
    assert calls == [64, 64]  # the inherited buffer was dropped, not drawn from


def test_codec_nonces_come_from_the_pool_and_never_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    from temporalio.api.common.v1 import Payload

    codec = AesGcmCodec(os.urandom(32))
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"synthetic"')
    calls = _count_urandom(monkeypatch)
    sealed = [codec._encrypt(payload) for _ in range(1000)]
    assert len(calls) <= 1000 * NONCE_BYTES // randomness.BLOCK_BYTES + 1  # blocks, not one call per nonce
    nonces = {s.data[:NONCE_BYTES] for s in sealed}
    assert len(nonces) == 1000
    assert all(codec._decrypt(s) == payload for s in sealed[:50])
