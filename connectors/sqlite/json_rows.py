"""Hot reads as one row of JSON: a search's SQLite reads cross into Python once, not per row.

Python's sqlite3 module lets go of the GIL around every step of a statement and every text
column it copies out, and takes it back after. Alone, that costs nothing. Beside any thread
running Python (another search, the event loop, the vector leg) every take-back waits for
that thread to yield: the default switch interval is 5 ms. Measured at 100k chunks, the
chunk directory's 200-row lookup took 0.55 ms alone and 204 ms beside one busy thread; the
same rows as one JSON array took 11 ms there. Under concurrent searches that wait was most
of a search's time, and why the service did not get faster with more clients.

So the hot statements aggregate their rows with `json_group_array(json_array(...))` and
Python parses the one text with `json.loads`. JSON holds SQLite's integers exactly (the
open `valid_to`, 2^63 - 1, included) and text as text; it cannot hold BLOBs, and it would
print REALs with 15 digits: a REAL goes through `exact_real`, read back with `float`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any


def json_array_rows(select_list: str) -> str:
    """The select list that aggregates each row's `select_list` into one JSON array."""
    return f"json_group_array(json_array({select_list}))"


def exact_real(expression: str) -> str:
    """`expression` (a REAL) as text that `float()` reads back bit for bit.

    SQLite's printf gives 17 significant digits only with its `!` flag; 17 digits identify
    every double (tests/test_sqlite_json_rows.py holds SQLite to it).
    """
    return f"printf('%!.17g', {expression})"


def read_json_rows(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
) -> list[list[Any]]:
    """The rows of `sql`, a statement that selects only `json_array_rows(...)`."""
    row = conn.execute(sql, tuple(params)).fetchone()
    if row is None or row[0] is None:
        return []
    rows: list[list[Any]] = json.loads(row[0])
    return rows


__all__ = ["exact_real", "json_array_rows", "read_json_rows"]
