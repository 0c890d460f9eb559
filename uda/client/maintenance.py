"""The store's upkeep: the operator commands of `AsyncClient`, apart from search and write.

What `uda stats`, `uda tune`, `uda check` and `uda sync` run: the store's counts and its
graph's shape, the tuning of the associative mode's PageRank weight, and the consistency of
the derived stores with the system of record (check, repair, finishing interrupted writes).
They are a mixin of their own so that `uda.client.async_client` holds the client's core (opening the
stores, searching, writing); `uda.client.Client` forwards each of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uda.query.auto.choice import choose
from uda.tuning import Tuning
from uda.tuning import run as tuning_run
from uda.write import consistency
from uda.write.consistency import ConsistencyReport, RepairReport
from uda.write.writer import derived_stores

if TYPE_CHECKING:
    from connectors.base import Connector, RelationalCapable
    from uda.config import Profile
    from uda.query.planner import Planner
    from uda.write.writer import Writer


class StoreMaintenance:
    """The operator commands `AsyncClient` mixes in: stats, tuning and consistency."""

    if TYPE_CHECKING:
        # What they use of the client they are mixed into (`uda.client.async_client.AsyncClient`).
        profile: Profile
        _connectors: list[Connector]

        def _require(self) -> tuple[Planner, Writer]: ...

        def _system_of_record(self) -> RelationalCapable: ...

    async def sync(self) -> dict[str, int]:
        """Finish any interrupted write: apply the outbox to every store."""
        planner, writer = self._require()
        try:
            return await writer.sync()
        finally:
            planner.graph_changed()

    async def stats(self) -> dict[str, Any]:
        """Counts from the system of record, with the embedder and the model of the vectors.

        `graph` is the graph's shape and the mode the planner's automatic mode chooses from
        it (uda/query/auto); `tuning` is what `uda tune` recorded (None: never run).

        `embedding_model` is the fingerprint the store recorded with its first write (None
        before it); `embedder` is the profile's runtime.
        """
        planner, _ = self._require()
        sor = self._system_of_record()
        shape = await planner.graph_shape()
        tuning = await planner.tuning.read()
        return {
            "profile": self.profile.name,
            "embedder": self.profile.embedder,
            "embedding_model": await sor.embedding_model(),
            **(await sor.counts()),
            "graph": {**shape.to_dict(), "auto_mode": choose(shape).mode.value},
            "tuning": None if tuning is None else tuning.to_dict(),
        }

    async def tune(
        self,
        *,
        queries: int = tuning_run.DEFAULT_QUERIES,
        seed: int = 0,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Tuning:
        """Choose the associative mode's PageRank weight on this store's own data; record it.

        Pseudo-queries built from the store (a sentence of an asset, answered by an asset
        that shares a node with it) measure each weight of a fixed grid; half the queries
        choose, the other half must confirm (uda/tuning, ADR 38). Searches then use the
        recorded weight below the profile's `[search.weights]` and the request's own.

        Args:
            queries: how many pseudo-queries (40 to 2000).
            seed: which ones; the same store and seed give the same choice.
            dry_run: measure and choose, record nothing.
            progress: called with (searches done, searches in all).

        Raises:
            InvalidRequestError: `queries` out of range.
            NothingToTuneError: too little graph to build the queries from.
        """
        planner, _ = self._require()
        tuning = await tuning_run.tune(
            planner,
            self._system_of_record(),
            queries=queries,
            seed=seed,
            dry_run=dry_run,
            progress=progress,
        )
        if not dry_run:
            planner.tuning.keep(tuning)
        return tuning

    async def forget_tuning(self) -> None:
        """Forget what `tune` recorded: searches use the mode's own weight again."""
        planner, _ = self._require()
        await self._system_of_record().record_tuning(None)
        planner.tuning.keep(None)

    async def check(self) -> ConsistencyReport:
        """Compare every derived store with the system of record; changes nothing.

        The report names, per store, what is missing, extra or stale, and what the outbox
        still holds (see `uda.write.consistency`).
        """
        sor = self._system_of_record()
        return await consistency.check(sor, derived_stores(self._connectors))

    async def repair(self, report: ConsistencyReport | None = None) -> RepairReport:
        """Make every derived store match the system of record again, then check once more.

        Args:
            report: a check to work from (None: check now).
        """
        planner, writer = self._require()
        sor = self._system_of_record()
        try:
            return await consistency.repair(sor, derived_stores(self._connectors), writer, report)
        finally:
            planner.graph_changed()
