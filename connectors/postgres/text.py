"""Statements of the PostgreSQL lexical leg: term index writes, rebuild, upgrade, BM25 SQL.

Terms come from `connectors.analyzer` in Python (the same as on SQLite, so both profiles
score alike) and travel by COPY; BM25 is computed on the server from the occurrences of the
query terms in the visible chunks only (docs/adr/0005-lexical-statistics-per-caller.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from connectors.analyzer import ANALYZER_VERSION, WORD_TERM_SQL, chunk_length, term_frequencies
from connectors.contract.system_of_record import DERIVED_CHUNK_COLUMNS, column_list, conflict_update

_TEXT_CHUNK_COLUMNS = (*DERIVED_CHUNK_COLUMNS, "name", "text")
# `length` is 0 until `index_terms` counts the terms; an update (new metadata) leaves it.
UPSERT_TEXT_CHUNK = f"""
INSERT INTO text_chunks ({column_list(_TEXT_CHUNK_COLUMNS)}, length)
VALUES ({", ".join(["%s"] * len(_TEXT_CHUNK_COLUMNS))}, 0)
{conflict_update("chunk_id", _TEXT_CHUNK_COLUMNS)}
"""  # noqa: S608 - fixed fragments only
# A chunk whose term rows do not add up to its length lost (or gained) index entries.
# (Joined identifiers are term rows outside the length, connectors.analyzer.chunk_length.)
TEXT_INDEX_DRIFT = f"""
SELECT count(*) FROM text_chunks t
LEFT JOIN (
    SELECT chunk_id, sum(tf) FILTER (WHERE {WORD_TERM_SQL}) AS total
    FROM chunk_terms GROUP BY chunk_id
) c ON c.chunk_id = t.chunk_id
WHERE t.length <> coalesce(c.total, 0)
"""  # noqa: S608 - fixed fragments only
# The analyzer that indexed the store, as a `meta` key (its values are numbers).
_ANALYZER_KEY = "text_analyzer:" + ANALYZER_VERSION

# Bumped by every transaction that changes `text_chunks`, as its last statement: a reader's
# snapshot that sees generation g sees exactly the text writes that made g, so visible
# statistics computed under g stay true while the generation is g. Last, because the row
# lock it takes is then held only until the commit right after it (no lock-order cycle with
# the chunk rows the transaction wrote before). `meta` values are numbers.
BUMP_GENERATION = """
INSERT INTO meta (key, value) VALUES ('lexical_generation', 1)
ON CONFLICT (key) DO UPDATE SET value = meta.value + 1
"""

# BM25 (Lucene idf, k1, b) with the statistics of the chunks the caller may see only:
# visible count, visible average length, visible document frequency.
# Count and average length need a scan of every visible chunk (a full table scan for a
# broad caller), so the caller passes the values it computed under generation %(gen)s and
# the scan runs only when the generation moved on (its one-time filter then holds); the
# statistics used come back with every row, with the generation they belong to.
_BM25 = """
WITH q AS (
    SELECT DISTINCT unnest(%(terms)s::text[]) AS term
), gen AS MATERIALIZED (
    SELECT coalesce((SELECT value FROM meta WHERE key = 'lexical_generation'), 0) AS value
), stats AS MATERIALIZED (
    SELECT %(n)s::float8 AS n, %(avgdl)s::float8 AS avgdl FROM gen WHERE gen.value = %(gen)s
    UNION ALL
    SELECT count(*)::float8, avg(t.length)::float8 FROM text_chunks t
    WHERE (SELECT value FROM gen) <> %(gen)s AND {where}
    HAVING count(*) > 0
), occ AS (
    SELECT c.chunk_id, c.term, c.tf::float8 AS tf, t.length::float8 AS length
    FROM q
    JOIN chunk_terms c ON c.term = q.term
    JOIN text_chunks t ON t.chunk_id = c.chunk_id
    WHERE {where}
), df AS (
    SELECT term, count(*)::float8 AS df FROM occ GROUP BY term
), scored AS (
    SELECT occ.chunk_id,
           sum(ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
               * occ.tf * (%(k1)s + 1)
               / (occ.tf + %(k1)s * (1 - %(b)s + %(b)s * occ.length / stats.avgdl))) AS score
    FROM occ JOIN df ON df.term = occ.term CROSS JOIN stats
    GROUP BY occ.chunk_id
), best AS MATERIALIZED (
    SELECT chunk_id, score FROM scored ORDER BY score DESC, chunk_id COLLATE "C" LIMIT %(k)s
)
SELECT b.chunk_id, t.element_id, t.version, t.text, b.score, stats.n, stats.avgdl, gen.value
FROM best b JOIN text_chunks t ON t.chunk_id = b.chunk_id CROSS JOIN stats CROSS JOIN gen
ORDER BY b.score DESC, b.chunk_id COLLATE "C"
"""


def bm25_sql(where: str) -> str:
    """The lexical query, with the pushdown condition over `t` in both of its places."""
    return _BM25.format(where=where)


async def index_terms(conn: AsyncConnection[Any], chunks: Sequence[tuple[str, str, str]]) -> None:
    """Replace the term rows and length of `(chunk_id, name, text)` chunks.

    Runs inside the caller's transaction; the chunks' rows exist in `text_chunks`.
    """
    if not chunks:
        return
    ids = [chunk_id for chunk_id, _, _ in chunks]
    await conn.execute("DELETE FROM chunk_terms WHERE chunk_id = ANY(%s::text[])", (ids,))
    lengths: list[tuple[int, str]] = []
    async with conn.cursor() as cur:
        async with cur.copy("COPY chunk_terms (term, chunk_id, tf) FROM STDIN") as copy:
            for chunk_id, name, text in chunks:
                terms = term_frequencies(name, text)
                lengths.append((chunk_length(terms), chunk_id))
                for term, tf in terms.items():
                    await copy.write_row((term, chunk_id, tf))
        await cur.executemany("UPDATE text_chunks SET length = %s WHERE chunk_id = %s", lengths)


async def rebuild_terms(conn: AsyncConnection[Any]) -> None:
    """Recompute every chunk's terms and length, and record the analyzer that made them."""
    cur = await conn.execute("SELECT chunk_id, name, text FROM text_chunks")
    rows: list[tuple[str, str, str]] = await cur.fetchall()
    await conn.execute("TRUNCATE chunk_terms")
    await index_terms(conn, rows)
    await conn.execute("DELETE FROM meta WHERE key LIKE 'text\\_analyzer:%'")
    await conn.execute("INSERT INTO meta (key, value) VALUES (%s, 1)", (_ANALYZER_KEY,))
    await conn.execute(BUMP_GENERATION)


async def upgrade(conn: AsyncConnection[Any]) -> None:
    """Re-index a store made with another analyzer (inside the migration's transaction)."""
    cur = await conn.execute("SELECT 1 FROM meta WHERE key = %s", (_ANALYZER_KEY,))
    if await cur.fetchone() is None:
        await rebuild_terms(conn)
