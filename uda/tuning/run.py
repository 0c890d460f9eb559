"""`uda tune`: build pseudo-queries, measure the weights, record the choice in the store."""

from __future__ import annotations

from connectors.base import RelationalCapable
from uda.errors import InvalidRequestError, NothingToTuneError
from uda.query.planner import Planner
from uda.tuning.measure import GRID, MIN_QUERIES, Progress, choose, measure
from uda.tuning.pseudo import WIDEST_BRIDGE, pseudo_queries
from uda.tuning.settings import Tuning

DEFAULT_QUERIES = 200
MAX_QUERIES = 2000


async def tune(
    planner: Planner,
    system_of_record: RelationalCapable,
    *,
    queries: int = DEFAULT_QUERIES,
    seed: int = 0,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> Tuning:
    """Choose the associative mode's PageRank weight on this store, and record it.

    Args:
        planner: runs the searches (the client's, with its profile's weights).
        system_of_record: where the pseudo-queries come from and the choice is kept.
        queries: pseudo-queries to build (half choose the weight, half confirm it).
        seed: which ones (the same store and seed give the same queries and choice).
        dry_run: measure and choose, but record nothing.
        progress: called with (searches done, searches in all) as it goes.

    Raises:
        InvalidRequestError: `queries` outside MIN_QUERIES..MAX_QUERIES.
        NothingToTuneError: the graph gives fewer than MIN_QUERIES pseudo-queries (nothing
            is recorded; the mode's own weight stays).
    """
    if not MIN_QUERIES <= queries <= MAX_QUERIES:
        raise InvalidRequestError(
            f"queries: {queries!r} is outside {MIN_QUERIES}..{MAX_QUERIES}",
            field="queries",
            value=queries,
        )
    built = await pseudo_queries(system_of_record, count=queries, seed=seed)
    if len(built) < MIN_QUERIES:
        raise NothingToTuneError(
            f"only {len(built)} pseudo-queries could be built from this store's graph, and "
            f"{MIN_QUERIES} are needed: tuning needs assets that share a node (an entity two "
            f"passages mention, a page linking two others) joining at most {WIDEST_BRIDGE} "
            "assets. Nothing was recorded.",
            field="queries",
            value=len(built),
        )
    halves = await measure(planner, built, grid=GRID, progress=progress)
    tuning = choose(halves, queries=len(built), seed=seed)
    if not dry_run:
        await system_of_record.record_tuning(tuning.to_json())
    return tuning


__all__ = ["DEFAULT_QUERIES", "MAX_QUERIES", "tune"]
