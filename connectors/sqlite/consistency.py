"""What the SQLite system of record says the derived stores should hold, as a mixin.

`uda check` and `uda sync` (uda/write/consistency.py) compare each derived store with these
reads, and `enqueue` puts back the outbox entries a repair needs. The connector
(`connectors.sqlite.connector`) provides the two statement runners declared here.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from connectors.contract.records import OPEN
from connectors.sqlite.schema import (
    EXPECTED_CHUNKS_SQL,
    EXPECTED_EDGES_SQL,
    LATEST_VERSIONS_SQL,
    PENDING_COUNTS_SQL,
)


class SQLiteConsistency:
    """The consistency reads of `RelationalCapable`, over the connector's statements."""

    @abstractmethod
    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read statement."""

    @abstractmethod
    async def _write_many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """One statement over many rows, in one write transaction."""

    async def expected_chunks(self) -> dict[str, int]:
        """Every chunk id with its state's `valid_to`."""
        return dict(await self._select(EXPECTED_CHUNKS_SQL))

    async def expected_edges(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every edge key with its `(valid_from, valid_to)`."""
        return {(s, r, t): (vf, vt) for s, r, t, vf, vt in await self._select(EXPECTED_EDGES_SQL)}

    async def live_element_ids(self, prefix: str) -> list[str]:
        """Current, non-tombstoned ids starting with `prefix`, sorted."""
        rows = await self._select(
            f"SELECT element_id FROM states WHERE valid_to = {OPEN} AND NOT tombstone "  # noqa: S608
            "AND substr(element_id, 1, length(?1)) = ?1 ORDER BY element_id",
            (prefix,),
        )
        return [row[0] for row in rows]

    async def latest_versions(self) -> dict[str, int]:
        """Every element id with its newest version (tombstones included)."""
        return dict(await self._select(LATEST_VERSIONS_SQL))

    async def pending_counts(self) -> dict[str, int]:
        """Outbox entries per store."""
        return dict(await self._select(PENDING_COUNTS_SQL))

    async def enqueue(
        self, store: str, kind: Literal["state", "edge"], keys: Sequence[tuple[str | int, ...]]
    ) -> None:
        """Add outbox entries for `store`, as a commit would have."""
        await self._write_many(
            "INSERT INTO outbox (store, kind, key) VALUES (?,?,?)",
            [(store, kind, json.dumps(list(k))) for k in keys],
        )


__all__ = ["SQLiteConsistency"]
