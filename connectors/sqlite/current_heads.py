"""The current head of every element, in memory, caught up from the store at each read.

Phase 3 reads the heads of a search's candidates and reached nodes (a few hundred ids) on
every search. From the `states_head` index that cost about 11 µs of CPU an id at 30,000
elements (the probe, the JSON row, its parsing): the largest read a search makes after its
retrieval legs. Held in memory, a head costs a dictionary lookup.

What makes it exact is `state_log` (ADR 56): every commit appends the ids whose states it wrote or
retired, inside its own transaction, so the log's order is the commit order across every
process sharing the file (SQLite has one writer at a time). A read first applies the log
entries after the last one it applied, re-reading those ids' current heads, all inside the
caller's read snapshot: what it answers is the store as that snapshot sees it, never older,
whichever process wrote. A log that was pruned past the last entry applied (`prune_log`
keeps the last `_KEPT` entries) or a catch-up larger than a fresh load reloads everything.

Only current heads without filter values are held (`fetch_heads(ids, None,
filter_values=False)`, the common search); `as_of` reads and value filters read the index
as before. A store with more current elements than `MAX_ELEMENTS` is not held (a head takes
about 550 bytes: 165 MB at the limit).

Each head is held as its row, a tuple of strings, integers and None, and made a `StateHead`
when it is read. A tuple of such values is one the garbage collector stops tracking, so the
heads cost a full collection nothing; held as 300,000 `StateHead` objects (an instance and
its dict each), they added 0.33 s to every full collection of the process that holds them,
a pause that stops every search of a service.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import Any

from connectors.contract.records import OPEN
from connectors.contract.system_of_record import StateHead, head_from_row
from connectors.sqlite.json_rows import json_array_rows, read_json_rows
from connectors.sqlite.schema import HEAD_SELECT_WITHOUT_VALUES, state_rows_sql

log = logging.getLogger(__name__)

MAX_ELEMENTS = 300_000
_KEPT = 100_000  # log entries kept: a reader further behind reloads everything
_LOG = "INSERT INTO state_log (element_id) VALUES (?)"
_PRUNE = "DELETE FROM state_log WHERE seq <= (SELECT max(seq) FROM state_log) - ?"
_CHANGES = f"""
SELECT {json_array_rows("seq, element_id")}
FROM (SELECT seq, element_id FROM state_log WHERE seq > ? ORDER BY seq)
"""  # noqa: S608 - fixed fragments only
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

    Loaded once, in the background (`load`, on one of the owner's worker threads): until it
    is, and whenever it must be loaded again, reads raise `NotHeld` and the owner reads the
    index, so that no search waits for a load (about 0.2 s at 30,000 elements).

    Thread-safe: reads run on several worker threads; one lock covers catching up and
    answering, which take microseconds unless a commit came in between.
    """

    def __init__(self, max_elements: int | None = None) -> None:
        self._max = MAX_ELEMENTS if max_elements is None else max_elements
        self._heads: dict[str, tuple[Any, ...]] | None = None  # id -> its head's row
        self._applied = 0  # the last log entry the heads include
        self._lock = threading.Lock()
        self._loading = False
        # Found larger than `max_elements`: not counted again until the store is reopened
        # (counting the current states costs more than the reads it would save).
        self.too_large = False

    def heads(self, conn: sqlite3.Connection, element_ids: Sequence[str]) -> dict[str, StateHead]:
        """The current heads of these ids (`conn` inside the caller's read snapshot).

        Raises:
            NotHeld: not loaded (yet, or again), or the store is too large to be held: read
                the index instead (and `start_load` if it says so).
        """
        with self._lock:
            rows = self._caught_up(conn)
            found = [row for eid in element_ids if (row := rows.get(eid)) is not None]
        return {row[0]: head_from_row(row) for row in found}

    @property
    def held(self) -> bool:
        """Whether the heads are in memory (reads are answered from them)."""
        return self._heads is not None

    def start_load(self) -> bool:
        """Whether the caller should run `load` now (once: later callers are told no)."""
        with self._lock:
            if self._heads is not None or self._loading or self.too_large:
                return False
            self._loading = True
            return True

    def load(self, conn: sqlite3.Connection) -> None:
        """Read every current head (`conn` inside a read snapshot of its own)."""
        try:
            if conn.execute(_COUNT).fetchone()[0] > self._max:
                self.too_large = True
                return
            applied = conn.execute(_LAST).fetchone()[0]
            heads = {row[0]: tuple(row) for row in read_json_rows(conn, _ALL)}
            with self._lock:
                # Reads catch up from `applied`, however many commits came in since.
                self._heads, self._applied = heads, applied
        finally:
            self._loading = False

    def load_in_background(
        self,
        executor: Executor,
        snapshot: Callable[[], AbstractContextManager[sqlite3.Connection]],
    ) -> None:
        """Start `load` on `executor` in a snapshot of its own, unless one is due or done."""
        if not self.start_load():
            return

        def load() -> None:
            try:
                with snapshot() as conn:
                    self.load(conn)
            except Exception as exc:  # reads keep taking the index, where it fails visibly
                log.warning("loading the current heads failed: %s", exc)

        try:
            executor.submit(load)
        except RuntimeError:  # the executor is shutting down: the store is closing
            self._loading = False

    def _caught_up(self, conn: sqlite3.Connection) -> dict[str, tuple[Any, ...]]:
        heads = self._heads
        if heads is None:
            raise NotHeld
        changes: list[list[Any]] = read_json_rows(conn, _CHANGES, (self._applied,))
        if not changes:
            return heads
        ids = sorted({eid for _, eid in changes})
        if changes[0][0] != self._applied + 1 or len(ids) > len(heads) // 2 + 1000:
            # Pruned past what was applied, or cheaper loaded afresh.
            self._heads = None
            raise NotHeld
        for eid in ids:
            heads.pop(eid, None)
        for row in read_json_rows(conn, _CURRENT, (json.dumps(ids), OPEN)):
            heads[row[0]] = tuple(row)
        self._applied = int(changes[-1][0])
        return heads


class NotHeld(Exception):
    """The heads are not in memory: not loaded yet, loaded again, or too many to hold."""


__all__ = ["MAX_ELEMENTS", "CurrentHeads", "NotHeld", "log_changes"]
