"""The embedded profile's files are the service's alone: the data dir 0700, its databases and keys 0600.

Why: the data dir holds the durable store (every memory's text), the Temporal dev server's history, the
vector index and the keys that sign tokens and seal history. With the usual umask they would be
created world-readable, and any local account could read every memory, or mint a token with the
secret. So the dir is created (and kept) 0700, each SQLite database is created 0600 before SQLite opens
it (SQLite gives its -wal and -shm files the database's own mode), and a key file is created 0600.

A key file found with looser permissions is refused, not silently tightened: someone may already have
read it, so the operator is told the file and the fix (`chmod 600`, and rotating the key if others could
read it), and the service does not start on a key it cannot vouch for.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_OTHERS = 0o077
PRIVATE_UMASK = 0o077
"""For a child process that creates its own files there (the Temporal dev server): 0600 and 0700."""


class LooseKeyFile(RuntimeError):
    """A key file that group or others may read or write: the service refuses to start on it."""


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) 0700, or tighten it to 0700 if it exists: the service's own dir."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if mode_of(path) != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 if absent (a database file before its engine opens it); an
    existing one the service created is tightened to 0600."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        if mode_of(path) & _OTHERS:
            os.chmod(path, PRIVATE_FILE)
    else:
        os.close(fd)
    return path


def check_key_file(path: Path) -> None:
    """Refuse a key file that group or others may read or write, saying how to fix it."""
    mode = mode_of(path)
    if mode & _OTHERS:
        raise LooseKeyFile(
            f"{path} has mode {mode:04o}: group or others may read it. Run `chmod 600 {path}` "
            "(and rotate the key if anyone else could have read it), then start again."
        )


def with_umask(umask: int, argv: list[str]) -> list[str]:
    """`argv` run under `umask`, through the interpreter (exec, so the pid is the program's own).

    Why not Popen's `umask=`: uvloop, which `memwarden up` runs on, does not accept it; and changing
    this process's umask around the spawn would race with its other threads creating files. The
    Temporal dev server creates temporal.db itself (a file made for it beforehand is taken as an
    already-initialised database), so only its umask can make the file 0600.
    """
    return [sys.executable, "-c", f"import os, sys; os.umask({umask:#o}); os.execvp(sys.argv[1], sys.argv[1:])", *argv]
