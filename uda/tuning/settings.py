"""What `uda tune` records in the store: the chosen weight, and what it was chosen from.

The document is JSON in the system of record's settings (`RelationalCapable.tuning`), so
every client of the store reads the same one. A document this version cannot read (another
version wrote it, or it was edited by hand) is ignored with a warning: an unreadable tuning
must never stop a search, it only leaves the mode's own weight in place.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

_log = logging.getLogger(__name__)
VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """The associative mode's PageRank weight as `uda tune` chose it.

    Attributes:
        centrality_weight: the weight searches use (below the profile's and the request's).
        default_weight: the mode's own weight, kept when the measurement does not confirm
            another.
        tuned_at: when it was chosen (ISO 8601, UTC).
        queries: how many pseudo-queries were measured (half chose, half confirmed).
        seed: the sampling seed (the same seed and store give the same queries).
        recall: Recall@5 per weight on the half that chose, then on the half that confirmed.
        reason: why this weight, in a sentence.
    """

    centrality_weight: float
    default_weight: float
    tuned_at: str
    queries: int
    seed: int
    recall: Mapping[str, Mapping[str, float]] = field(
        default_factory=dict[str, Mapping[str, float]]
    )
    reason: str = ""

    @property
    def changed(self) -> bool:
        """Whether the tuned weight differs from the mode's own."""
        return self.centrality_weight != self.default_weight

    def describe(self) -> str:
        """One line for `explain()` and `uda stats`."""
        return (
            f"PageRank weight {self.centrality_weight:g} from `uda tune` "
            f"({self.tuned_at[:10]}, {self.queries} pseudo-queries)"
        )

    def to_json(self) -> str:
        """The document kept in the store."""
        return json.dumps({"version": VERSION, **asdict(self)}, sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (`uda stats`)."""
        return asdict(self)

    @classmethod
    def from_json(cls, document: str | None) -> Tuning | None:
        """The tuning a store holds (None: none, or one this version cannot read)."""
        if document is None:
            return None
        try:
            data = json.loads(document)
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}")
            weight = float(data["centrality_weight"])
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"centrality_weight {weight!r}")
            return cls(
                centrality_weight=weight,
                default_weight=float(data["default_weight"]),
                tuned_at=str(data["tuned_at"]),
                queries=int(data["queries"]),
                seed=int(data["seed"]),
                recall={
                    str(half): {str(w): float(r) for w, r in by_weight.items()}
                    for half, by_weight in dict(data.get("recall", {})).items()
                },
                reason=str(data.get("reason", "")),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            _log.warning("the store's tuning cannot be read (%s); the mode's weight is used", exc)
            return None


__all__ = ["VERSION", "Tuning"]
