"""Why each result is where it is: the plan, and every leg's raw score, rank and share.

`SearchResponse.explain()` builds an `Explanation`; `to_dict()` / `from_dict()` carry it
over HTTP with the Arrow table, and `plan_from_dict()` rebuilds the plan it ran with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    """Why a result is where it is."""

    element_id: str
    name: str
    score: float
    decay: float
    legs: Mapping[Leg, LegExplanation]


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
                )
                for r in data["results"]
            ],
        )

    def __str__(self) -> str:
        lines = [self.plan.describe(), ""]
        header = (
            f"{'#':>2} {'score':>8} {'decay':>5}  "
            + "  ".join(f"{leg.value:<24}" for leg in Leg)
            + "  element"
        )
        lines.append(header)
        for position, r in enumerate(self.results, start=1):
            cells: list[str] = []
            for leg in Leg:
                e = r.legs[leg]
                if e.rank is None:
                    cells.append(f"{'-':<24}")
                else:
                    raw = "" if e.raw is None else f"{e.raw:.3f}->"
                    shown = "" if e.score is None else f"{e.score:.3f}"
                    cells.append(f"{f'#{e.rank} {raw}{shown} +{e.contribution:.4f}':<24}")
            lines.append(
                f"{position:>2} {r.score:8.5f} {r.decay:5.3f}  "
                + "  ".join(cells)
                + f"  {r.name} ({r.element_id})"
            )
        return "\n".join(lines)


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
    defaults = SearchDefaults(
        weights={Leg(leg): float(w) for leg, w in data["weights"].items()},
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
    )
    types = tuple(data["element_types"])
    return dataclasses.replace(
        plan,
        element_types=types,
        pushdown=dataclasses.replace(plan.pushdown, element_types=types),
        as_of_ms=int(data.get("as_of_ms", plan.as_of_ms)),
        timings_ms={str(k): float(v) for k, v in data.get("timings_ms", {}).items()},
    )
