"""Random bytes and uuid4s for the hot paths, drawn from the OS in blocks instead of one syscall each.

Why: `os.urandom` (and `uuid.uuid4`, which calls it) releases the GIL around its `getrandom` syscall.
In this process the event loop shares the GIL with the embedding threads and Temporal's workflow
activation threads, so every release can hand the GIL to one of them and the loop waits until that
thread lets go (up to the 5 ms switch interval). Measured in the running stack, one 12-byte
`os.urandom` for a payload nonce took 122 us on average against 0.6 us alone, and a write made a dozen
such calls (eight nonces, its memory id, its subject handle, audit ids): ~1.4 ms of waiting on the
critical path. Here one `os.urandom(4096)` serves ~340 nonces.

The bytes are the operating system's CSPRNG output, as before: AES-GCM nonces need uniqueness, ids need
unpredictability, and both hold for bytes taken once each from the OS. The one new risk, a forked
child handing out its parent's buffered bytes again, is closed twice: `os.register_at_fork` empties the
pool in the child, and every draw checks the process id.
"""

from __future__ import annotations

import os
import threading
import uuid

BLOCK_BYTES = 4096
"""Bytes fetched from the OS per refill: ~340 nonces or 256 uuid4s per syscall."""


class RandomPool:
    """OS random bytes handed out once each, refilled a block at a time; safe across threads and fork."""

    def __init__(self, block: int = BLOCK_BYTES) -> None:
        if block < 16:
            raise ValueError("block must be >= 16 bytes")
        self._block = block
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0
        self._pid = os.getpid()

    def _reset(self) -> None:
        """Forget the buffer (a forked child must never reuse its parent's bytes)."""
        self._buf, self._pos, self._pid = b"", 0, os.getpid()

    def take(self, n: int) -> bytes:
        """`n` fresh random bytes; `n` above the block size goes straight to the OS."""
        if n < 0:
            raise ValueError("n must be >= 0")
        if n > self._block:
            return os.urandom(n)
        with self._lock:
            if self._pid != os.getpid():
                self._reset()
            if self._pos + n > len(self._buf):
                self._buf, self._pos = os.urandom(self._block), 0
            start = self._pos
            self._pos = start + n
            return self._buf[start : start + n]

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID, as `uuid.uuid4()` makes one, from this pool's bytes."""
        return uuid.UUID(bytes=self.take(16), version=4)


_pool = RandomPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool._reset)


def token_bytes(n: int) -> bytes:
    """`n` random bytes from the process's pool (nonces, ids)."""
    return _pool.take(n)


def uuid4() -> uuid.UUID:
    """A random UUID from the process's pool: use in place of `uuid.uuid4()` on request paths."""
    return _pool.uuid4()
