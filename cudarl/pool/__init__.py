"""The tester pool: its client (``client``: start, find and use the ``TesterPool`` actor from any
Ray driver) and its logic (``book``: items owed and judged, ``records``: item and worker records
and the pool's policies, ``scaling``: worker targets). The actor itself is ``actors.tester_pool``.

The client's names are importable from here (``from cudarl.pool import start_pool``), lazily, so
that the actors, which import the logic, never load the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudarl.pool.client import PoolClient, PoolError, connect_ray, find_pool, start_pool

_CLIENT_NAMES = ("PoolClient", "PoolError", "connect_ray", "find_pool", "start_pool")
__all__ = ["PoolClient", "PoolError", "connect_ray", "find_pool", "start_pool"]


def __getattr__(name: str):
    if name in _CLIENT_NAMES:
        return getattr(importlib.import_module("cudarl.pool.client"), name)
    raise AttributeError(f"module 'cudarl.pool' has no attribute {name!r}")
