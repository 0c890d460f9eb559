"""Measure the associative mode's PageRank weights on pseudo-queries, and choose one.

How it avoids tuning to its own pseudo-queries:

- One setting is tuned, over a fixed grid of five values (`GRID`), not a search over many
  knobs: the lexical weight is not tuned, because sentences taken from the store favour
  the lexical leg or penalise it by construction (ADR 38).
- The pseudo-queries are split in two halves before anything is measured. One half
  chooses the weight; the other must confirm it, beating the mode's own weight there too.
  Otherwise the mode's weight stays: a choice that does not hold on queries it was not
  chosen on is noise.
- Ties go to the mode's weight, then to the nearer value.
- The asset a query was taken from is withheld from its answer, so the lexical leg's
  trivial find is not counted (`uda.tuning.pseudo`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ontology import Sensitivity
from uda.query.auto.choice import ASSOCIATIVE_CENTRALITY_WEIGHT, AutoMode
from uda.query.clearance import ALL_PROJECTS
from uda.query.contracts import SearchRequest
from uda.query.fusion import Leg
from uda.query.planner import Planner
from uda.tuning.pseudo import PseudoQuery
from uda.tuning.settings import Tuning

# Fixed before the mode's weight moved to its top (ADR 38, ADR 45): the pseudo-queries favour
# more weight by construction, so the grid's upper end is a bound, not a measurement. With the
# mode at 16, tuning can only lower the weight, where the store's graph finds fewer second hops.
GRID = (1.0, 2.0, 4.0, 8.0, 16.0)
CUTOFF = 5  # Recall@5: the answers an agent reads
CONCURRENT = 2  # searches in flight (the machine's cores, not more)
MIN_QUERIES = 40  # fewer cannot tell the weights apart from noise
Progress = Callable[[int, int], None]
# Everything: the weight is the store's, chosen over all of it (it discloses no element,
# count or score: one value of a fixed grid).
_EVERYTHING = [max(Sensitivity, key=lambda s: s.rank).value, ALL_PROJECTS]


@dataclass(frozen=True)
class Halves:
    """Recall@5 per weight on the half that chooses and on the half that confirms."""

    choose: Mapping[float, float]
    confirm: Mapping[float, float]


async def measure(
    planner: Planner,
    queries: Sequence[PseudoQuery],
    *,
    grid: Sequence[float] = GRID,
    progress: Progress | None = None,
) -> Halves:
    """Recall@5 of every weight of `grid` on each half of `queries` (even and odd places)."""
    total = len(queries) * len(grid)
    done = 0
    found: dict[float, list[bool]] = {w: [False] * len(queries) for w in grid}
    vectors: dict[int, list[float]] = {}
    gate = asyncio.Semaphore(CONCURRENT)

    async def one(index: int, weight: float) -> None:
        nonlocal done
        query = queries[index]
        async with gate:
            request = SearchRequest.build(
                query=query.text,
                limit=CUTOFF + 1,  # the withheld asset may take one place
                clearance_scope=_EVERYTHING,
                weights={Leg.CENTRALITY: weight},
                expand_depth=2,
                traverse="association",
                centrality="pagerank",
                graph_candidates=True,
            )
            # The request sets every graph option; the mode adds how the legs meet (by rank).
            plan = planner.plan(request, AutoMode.ASSOCIATIVE.value)
            response, vector = await planner.answer(plan, None, vectors.get(index))
        if vector is not None:
            vectors[index] = vector
        ids = [r.element_id for r in response.results if r.element_id != query.withheld]
        found[weight][index] = query.answer in ids[:CUTOFF]
        done += 1
        if progress is not None:
            progress(done, total)

    for weight in grid:  # the first weight embeds each query; the others reuse its vector
        await asyncio.gather(*(one(i, weight) for i in range(len(queries))))
    return Halves(
        choose={w: _share(hits[0::2]) for w, hits in found.items()},
        confirm={w: _share(hits[1::2]) for w, hits in found.items()},
    )


def choose(
    halves: Halves, *, queries: int, seed: int, default: float = ASSOCIATIVE_CENTRALITY_WEIGHT
) -> Tuning:
    """The weight the choosing half prefers, if the confirming half agrees; else `default`."""
    best = max(
        halves.choose, key=lambda w: (halves.choose[w], w == default, -_distance(w, default))
    )
    if best == default:
        weight, reason = default, "no weight of the grid measured better than the mode's own"
    elif halves.confirm[best] > halves.confirm.get(default, 0.0):
        weight = best
        reason = (
            f"{best:g} found more second hops than {default:g} on the queries that chose it "
            f"({halves.choose[best]:.3f} vs {halves.choose[default]:.3f}) and on those that "
            f"confirmed it ({halves.confirm[best]:.3f} vs {halves.confirm[default]:.3f})"
        )
    else:
        weight = default
        reason = (
            f"{best:g} measured better on the queries that chose it but not on those that "
            "confirmed it: the mode's own weight is kept"
        )
    return Tuning(
        centrality_weight=weight,
        default_weight=default,
        tuned_at=datetime.now(UTC).isoformat(timespec="seconds"),
        queries=queries,
        seed=seed,
        recall={
            "choose": {f"{w:g}": round(r, 4) for w, r in halves.choose.items()},
            "confirm": {f"{w:g}": round(r, 4) for w, r in halves.confirm.items()},
        },
        reason=reason,
    )


def _share(hits: Sequence[bool]) -> float:
    return sum(hits) / len(hits) if hits else 0.0


def _distance(weight: float, default: float) -> float:
    """How far apart two weights are, on the grid's doubling scale."""
    return abs(math.log2(max(weight, 1e-9)) - math.log2(max(default, 1e-9)))


__all__ = ["CUTOFF", "GRID", "MIN_QUERIES", "Halves", "choose", "measure"]
