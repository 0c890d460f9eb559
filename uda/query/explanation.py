"""Why each result is where it is: the plan, every leg's raw score, rank and share.

A result that matches the query perfectly (`uda.query.exact`) also names the kind of match,
the term that matched, and the boost that put it before the others.

`SearchResponse.explain()` builds an `Explanation`; `to_dict()` / `from_dict()` carry it
over HTTP with the Arrow table, and `plan_from_dict()` rebuilds the plan it ran with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uda.query.deadlines import Degradation
from uda.query.exact import ExactMatch, MatchKind
from uda.query.fusion import Leg

if TYPE_CHECKING:
    from uda.query.plan import Plan


@dataclass(frozen=True, kw_only=True)
class LegExplanation:
    """One leg's evidence for one result."""

    raw: float | None
    score: float | None
    rank: int | None
    weight: float
    contribution: float


@dataclass(frozen=True, kw_only=True)
class ResultExplanation:
    """Why a result is where it is.

    Attributes:
        score: the fused score (the sum of the legs' contributions), plus `boost`.
        exact: how the result matches the query perfectly (its name is the query: `name`; a
            quoted phrase or an identifier of the query occurs verbatim: `phrase`,
            `identifier`), and the term that matched; None when it does not.
        boost: what the perfect match added to the fused score: above any fused score, so
            that perfect matches rank first (0 for the others).
        entities: the names of the graph nodes the query names that the result is, or is
            one edge from (`uda.query.entities`); what its `entity` leg stands for.
    """

    element_id: str
    name: str
    score: float
    decay: float
    legs: Mapping[Leg, LegExplanation]
    exact: ExactMatch | None = None
    boost: float = 0.0
    entities: tuple[str, ...] = ()

    @property
    def fused(self) -> float:
        """The fused score alone, without the boost of a perfect match."""
        return self.score - self.boost if self.boost else self.score

    @property
    def match_kind(self) -> MatchKind | None:
        """The kind of perfect match (`name`, `phrase`, `identifier`), or None."""
        return None if self.exact is None else self.exact.kind


@dataclass(frozen=True, kw_only=True)
class Explanation:
    """The plan, the phase timings, and every leg's rank and contribution per result."""

    plan: Plan
    results: Sequence[ResultExplanation]

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for JSON; `from_dict` reads it back."""
        return {
            # The two plan values `Plan.to_dict` leaves out, so that the plan round-trips.
            "plan": {
                **self.plan.to_dict(),
                "as_of_ms": self.plan.as_of_ms,
                "max_context_nodes": self.plan.max_context_nodes,
            },
            "results": [
                {
                    "element_id": r.element_id,
                    "name": r.name,
                    "score": r.score,
                    "decay": r.decay,
                    "exact": None
                    if r.exact is None
                    else {"kind": r.exact.kind.value, "term": r.exact.term},
                    "boost": r.boost,
                    "entities": list(r.entities),
                    "legs": {
                        leg.value: {
                            "raw": e.raw,
                            "score": e.score,
                            "rank": e.rank,
                            "weight": e.weight,
                            "contribution": e.contribution,
                        }
                        for leg, e in r.legs.items()
                    },
                }
                for r in self.results
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Explanation:
        """Rebuild an explanation from `to_dict()` output (e.g. one that came over HTTP)."""
        return cls(
            plan=plan_from_dict(data["plan"]),
            results=[
                ResultExplanation(
                    element_id=r["element_id"],
                    name=r["name"],
                    score=r["score"],
                    decay=r["decay"],
                    legs={Leg(leg): LegExplanation(**e) for leg, e in r["legs"].items()},
                    exact=_exact_from(r.get("exact")),
                    boost=float(r.get("boost", 0.0)),
                    entities=tuple(r.get("entities", ())),
                )
                for r in data["results"]
            ],
        )

    def __str__(self) -> str:
        lines = [self.plan.describe(), ""]
        header = (
            f"{'#':>2} {'score':>8} {'decay':>5} {'exact':<10}  "
            + "  ".join(f"{leg.value:<24}" for leg in Leg)
            + "  element"
        )
        lines.append(header)
        for position, r in enumerate(self.results, start=1):
            cells: list[str] = []
            for leg in Leg:
                e = r.legs.get(leg)  # an explanation from an older server lacks newer legs
                if e is None or e.rank is None:
                    cells.append(f"{'-':<24}")
                else:
                    raw = "" if e.raw is None else f"{e.raw:.3f}->"
                    shown = "" if e.score is None else f"{e.score:.3f}"
                    cells.append(f"{f'#{e.rank} {raw}{shown} +{e.contribution:.4f}':<24}")
            exact = "-" if r.exact is None else r.exact.kind.value
            lines.append(
                f"{position:>2} {r.score:8.5f} {r.decay:5.3f} {exact:<10}  "
                + "  ".join(cells)
                + f"  {r.name} ({r.element_id})"
                + (f"  linked to {', '.join(r.entities)}" if r.entities else "")
            )
        return "\n".join(lines)


def _exact_from(data: Mapping[str, Any] | None) -> ExactMatch | None:
    if data is None:
        return None
    return ExactMatch(kind=MatchKind(data["kind"]), term=str(data["term"]))


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Rebuild a plan from `Explanation.to_dict()["plan"]`.

    The request is re-resolved with the defaults the plan recorded, which gives back the same
    plan; the values that depend on where and when it ran (the clock, the element types the
    server knew, the timings) are taken as recorded.
    """
    from uda.config import SearchDefaults
    from uda.query.contracts import SearchRequest
    from uda.query.plan import make_plan

    request = SearchRequest.model_validate(data["request"])
    from uda.query.auto.choice import choice_from_dict

    weights = {Leg(leg): float(w) for leg, w in data["weights"].items()}
    defaults = SearchDefaults(
        weights=weights,
        pinned=frozenset(weights),  # the weights as resolved: the mode adds nothing
        half_life_days=float(data["half_life_days"]),
        decay_floor=float(data["decay_floor"]),
        max_context_nodes=int(data.get("max_context_nodes", SearchDefaults().max_context_nodes)),
    )
    connectors: Mapping[str, Any] = data["connectors"]
    plan = make_plan(
        request,
        defaults,
        vector=tuple(connectors["vector"]),
        text=tuple(connectors["text"]),
        graph=tuple(connectors["graph"]),
        system_of_record=str(connectors["system_of_record"]),
        auto=choice_from_dict(data.get("auto")),
    )
    types = tuple(data["element_types"])
    return dataclasses.replace(
        plan,
        element_types=types,
        pushdown=dataclasses.replace(plan.pushdown, element_types=types),
        as_of_ms=int(data.get("as_of_ms", plan.as_of_ms)),
        relevance="ranks" if data.get("relevance", plan.relevance) == "ranks" else "scores",
        timings_ms={str(k): float(v) for k, v in data.get("timings_ms", {}).items()},
        degraded=degradations_from(data.get("degraded") or []),
    )


def degradations_from(items: Sequence[Mapping[str, Any]]) -> list[Degradation]:
    """Degradations from their plain form (`Degradation.to_dict()`)."""
    return [
        Degradation(backend=str(d["backend"]), leg=d["leg"], reason=str(d["reason"])) for d in items
    ]
