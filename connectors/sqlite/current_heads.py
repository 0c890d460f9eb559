"""The current head of every element, in memory, caught up from the store at each read.

Phase 3 reads the heads of a search's candidates and reached nodes (a few hundred ids) on
every search. From the `states_head` index that cost about 11 µs of CPU an id at 30,000
elements (the probe, the JSON row, its parsing): the largest read a search makes after its
retrieval legs. Held in memory, a head costs a dictionary lookup.

What makes it exact is `state_log`: every commit appends the ids whose states it wrote or
retired, inside its own transaction, so the log's order is the commit order across every
process sharing the file (SQLite has one writer at a time). A read first applies the log
entries after the last one it applied, re-reading those ids' current heads, all inside the
caller's read snapshot: what it answers is the store as that snapshot sees it, never older,
whichever process wrote. A log that was pruned past the last entry applied (`prune_log`
keeps the last `_KEPT` entries) or a catch-up larger than a fresh load reloads everything.

Only current heads without filter values are held (`fetch_heads(ids, None,
filter_values=False)`, the common search); `as_of` reads and value filters read the index
as before. A store with more current elements than `MAX_ELEMENTS` is not held (about 500
bytes an element).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence

from connectors.contract.records import OPEN
from connectors.contract.system_of_record import StateHead, head_from_row
from connectors.sqlite.json_rows import json_array_rows, read_json_rows
from connectors.sqlite.schema import HEAD_SELECT_WITHOUT_VALUES, state_rows_sql

MAX_ELEMENTS = 500_000
_KEPT = 100_000  # log entries kept: a reader further behind reloads everything
_LOG = "INSERT INTO state_log (element_id) VALUES (?)"
_PRUNE = "DELETE FROM state_log WHERE seq <= (SELECT max(seq) FROM state_log) - ?"
_CHANGES = "SELECT seq, element_id FROM state_log WHERE seq > ? ORDER BY seq"
_LAST = "SELECT coalesce(max(seq), 0) FROM state_log"
_COUNT = f"SELECT count(*) FROM states WHERE valid_to = {OPEN}"  # noqa: S608 - a constant
# One JSON row, as every read a search may make (`connectors.sqlite.json_rows` says why).
_ALL = f"""
SELECT {json_array_rows(f"{HEAD_SELECT_WITHOUT_VALUES}, s.sensitivity_rank, s.scope")}
FROM states s WHERE s.valid_to = {OPEN}
"""  # noqa: S608 - fixed fragments only
_CURRENT = state_rows_sql(HEAD_SELECT_WITHOUT_VALUES, None)


def log_changes(conn: sqlite3.Connection, element_ids: Sequence[str]) -> None:
    """Record, inside a commit's transaction, the ids whose states it wrote or retired."""
    if not element_ids:
        return
    conn.executemany(_LOG, [(eid,) for eid in sorted(set(element_ids))])
    conn.execute(_PRUNE, (_KEPT,))


class CurrentHeads:
    """Every element's current head (without filter values), kept up to date by the log.

    Thread-safe: reads run on several worker threads; one lock covers catching up and
    answering, which take microseconds unless a commit came in between.
    """

    def __init__(self, max_elements: int | None = None) -> None:
        self._max = MAX_ELEMENTS if max_elements is None else max_elements
        self._heads: dict[str, StateHead] | None = None
        # Found larger than `max_elements`: not counted again until the store is reopened
        # (counting the current states costs more than the reads it would save).
        self.too_large = False
        self._applied = 0  # the last log entry the rows include
        self._lock = threading.Lock()

    def heads(self, conn: sqlite3.Connection, element_ids: Sequence[str]) -> dict[str, StateHead]:
        """The current heads of these ids (`conn` inside the caller's read snapshot).

        Raises:
            TooLarge: the store holds more current elements than are kept in memory; read
                the index instead.
        """
        with self._lock:
            if self.too_large:
                raise TooLarge
            heads = self._caught_up(conn)
            # Heads are frozen: every search may hold the same ones.
            return {eid: head for eid in element_ids if (head := heads.get(eid)) is not None}

    def _caught_up(self, conn: sqlite3.Connection) -> dict[str, StateHead]:
        heads = self._heads
        if heads is None:
            return self._load(conn)
        changes: list[tuple[int, str]] = conn.execute(_CHANGES, (self._applied,)).fetchall()
        if not changes:
            return heads
        ids = sorted({eid for _, eid in changes})
        if changes[0][0] != self._applied + 1 or len(ids) > len(heads) // 2 + 1000:
            return self._load(conn)  # pruned past what was applied, or cheaper afresh
        for eid in ids:
            heads.pop(eid, None)
        for row in read_json_rows(conn, _CURRENT, (json.dumps(ids), OPEN)):
            heads[row[0]] = head_from_row(row)
        self._applied = changes[-1][0]
        return heads

    def _load(self, conn: sqlite3.Connection) -> dict[str, StateHead]:
        self._heads = None
        if conn.execute(_COUNT).fetchone()[0] > self._max:
            self.too_large = True
            raise TooLarge
        applied = conn.execute(_LAST).fetchone()[0]
        heads = {row[0]: head_from_row(row) for row in read_json_rows(conn, _ALL)}
        self._heads, self._applied = heads, applied
        return heads


class TooLarge(Exception):
    """The store holds more current elements than `CurrentHeads` keeps in memory."""


__all__ = ["MAX_ELEMENTS", "CurrentHeads", "TooLarge", "log_changes"]
