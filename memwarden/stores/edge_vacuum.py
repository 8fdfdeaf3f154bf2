"""`python -m memwarden.stores.edge_vacuum <shard dir> <dim>`: vacuum a closed Qdrant Edge shard.

Why a separate process: `EdgeShard.optimize()` rebuilds every segment holding a deleted point and
holds the GIL for its whole run, long enough to freeze every other task of the worker (workflow tasks
would trip Temporal's 2 s deadlock detector) and, in the embedded profile, the API too. `EdgeIndex.vacuum`
closes its shard, runs this, and reopens it.
"""

from __future__ import annotations

import sys

from qdrant_edge import EdgeShard


def main(argv: list[str]) -> int:
    from memwarden.stores.vectors_edge import _config

    path, dim = argv[0], int(argv[1])
    shard = EdgeShard.load(path, _config(dim))
    try:
        shard.optimize()
        shard.flush()
    finally:
        shard.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
