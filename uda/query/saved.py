"""Saved queries: every search kept under its `query_id`, to be asked for again (ADR 23).

A search is saved with everything its pages need to come out the same later, from any
client of the store and after a restart: the request (with the clearance it was resolved
to), the HLC stamp and decay clock the first page pinned, the ranked pool, and the query
embedding (so a rerun embeds nothing). Saving is off the search's path: records queue in
memory and one background task writes them in batches; `drain()` waits for them (a rerun
drains first, so a client always finds its own queries). Old queries are forgotten after
the retention period.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from connectors.base import RelationalCapable
from connectors.contract.saved_queries import SavedQueryRow
from uda.errors import QueryNotFoundError
from uda.query.contracts import SearchRequest
from uda.query.cursors import Position
from uda.query.retries import Retries, retrying

log = logging.getLogger(__name__)

RETENTION_DAYS = 30
"""How long a saved query can be asked for again."""
_PRUNE_EVERY_S = 3600.0  # how often one process deletes expired queries


def new_query_id() -> str:
    """A random, unguessable id (128 bits): knowing one id tells nothing of another."""
    return "q_" + secrets.token_urlsafe(16)


@dataclass(frozen=True, kw_only=True)
class SavedQuery:
    """A search as it was asked, and what its first page pinned."""

    query_id: str
    owner: str | None
    created_ms: int
    request: SearchRequest  # clearance_scope: the resolved entries
    first_page: Position
    embedding: Sequence[float] | None = None

    def to_row(self) -> SavedQueryRow:
        """The row the system of record keeps."""
        body = {
            "request": self.request.model_dump(mode="json", exclude={"cursor"}),
            "as_of": self.first_page.as_of,
            "now_ms": self.first_page.now_ms,
            "pool": self.first_page.pool,
            "auto": self.first_page.auto,
            "tuned_weight": self.first_page.tuned_weight,
        }
        vector = None
        if self.embedding is not None:
            vector = np.asarray(self.embedding, dtype="<f4").tobytes()
        return SavedQueryRow(
            query_id=self.query_id,
            owner=self.owner,
            created_ms=self.created_ms,
            body=json.dumps(body, separators=(",", ":")),
            embedding=vector,
        )

    @classmethod
    def from_row(cls, row: SavedQueryRow) -> SavedQuery:
        """A saved query from its row."""
        body = json.loads(row.body)
        embedding = None
        if row.embedding is not None:
            embedding = np.frombuffer(row.embedding, dtype="<f4").astype(float).tolist()
        return cls(
            query_id=row.query_id,
            owner=row.owner,
            created_ms=row.created_ms,
            request=SearchRequest.model_validate(body["request"]),
            first_page=Position(
                as_of=body["as_of"],
                now_ms=body["now_ms"],
                pool=body["pool"],
                auto=body.get("auto"),  # None: saved before the automatic mode
                tuned_weight=_weight(body.get("tuned_weight")),  # None: untuned, or older
            ),
            embedding=embedding,
        )


def _weight(value: object) -> float | None:
    return None if value is None else float(str(value))


class QuerySaver:
    """Writes saved queries in the background, in batches, and reads them back.

    Args:
        system_of_record: where queries are kept.
        retention_days: queries older than this are deleted (at most hourly).
    """

    def __init__(
        self, system_of_record: RelationalCapable, retention_days: float = RETENTION_DAYS
    ) -> None:
        self._sor = system_of_record
        self._retention_ms = int(retention_days * 86_400_000)
        self._pending: list[SavedQuery] = []
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0

    def save(self, query: SavedQuery) -> None:
        """Queue a query; the background writer keeps it shortly after."""
        self._pending.append(query)  # made a row by the writer, off the search's path
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            older_than = 0
            now = time.monotonic()
            if now - self._last_prune >= _PRUNE_EVERY_S:
                self._last_prune = now
                older_than = int(time.time() * 1000) - self._retention_ms
            rows = [query.to_row() for query in batch]
            try:
                # Rows by query id: saving one twice keeps one, so a retry is safe.
                await retrying(
                    lambda rows=rows, older_than=older_than: self._sor.save_queries(
                        rows, older_than
                    ),
                    Retries(),
                )
            except Exception as exc:
                # The searches were answered; only asking for them again is lost. A read-only
                # store (a replica) cannot keep them at all.
                log.warning(
                    "could not save %d queries: %s",
                    len(batch),
                    exc,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )

    async def drain(self) -> None:
        """Wait until every queued query is written (or failed to be)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def load(self, query_id: str, owner: str | None) -> SavedQuery:
        """The saved query with this id, made by `owner` (None: any local caller).

        Raises:
            QueryNotFoundError: no such query, or one another principal made (the same
                answer, so ids of others cannot be probed).
        """
        await self.drain()
        row = await self._sor.load_query(query_id)
        if row is None or (owner is not None and row.owner != owner):
            raise QueryNotFoundError(
                f"query_id: no saved query {query_id!r} of yours (kept {RETENTION_DAYS} days)",
                field="query_id",
                value=query_id,
            )
        return SavedQuery.from_row(row)


__all__ = ["RETENTION_DAYS", "QuerySaver", "SavedQuery", "new_query_id"]
