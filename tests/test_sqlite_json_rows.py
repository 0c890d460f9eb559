"""Hot SQLite reads come as one JSON row: what they carry must come back unchanged."""

from __future__ import annotations

import random
import sqlite3
import struct

from connectors.contract.records import OPEN
from connectors.sqlite.json_rows import exact_real, json_array_rows, read_json_rows


def _doubles(n: int) -> list[float]:
    rng = random.Random(18)
    # -0.0 comes back as 0.0: equal in every comparison and sort, so not listed here.
    out = [0.1 + 0.2, 1 / 3, 2.0, 1e-300, 1e300, 5e-324, 17.25]
    out += [rng.uniform(-1e3, 1e3) for _ in range(n)]
    out += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(62)))[0] for _ in range(n)]
    return out


def test_exact_real_reads_back_every_double_bit_for_bit() -> None:
    conn = sqlite3.connect(":memory:")
    for value in _doubles(5_000):
        (text,) = conn.execute(f"SELECT {exact_real('?')}", (value,)).fetchone()
        assert float(text) == value, (value, text)
        assert struct.pack("<d", float(text)) == struct.pack("<d", value)


def test_json_rows_keep_integers_text_and_nulls() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id TEXT, n INTEGER, body TEXT, maybe TEXT)")
    hostile = ['x"y', "a\\b", "\x00nul", "é漢字🙂", "line\nbreak", "'; DROP TABLE t; --", ""]
    rows = [(f"id{i}", OPEN - i, text, None if i % 2 else text) for i, text in enumerate(hostile)]
    conn.executemany("INSERT INTO t VALUES (?,?,?,?)", rows)
    sql = f"SELECT {json_array_rows('id, n, body, maybe')} FROM t"
    assert sorted(tuple(r) for r in read_json_rows(conn, sql)) == sorted(rows)
    empty = f"SELECT {json_array_rows('id, n, body, maybe')} FROM t WHERE 0"
    assert read_json_rows(conn, empty) == []
