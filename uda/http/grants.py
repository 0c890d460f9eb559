"""From a principal's grant and a request's `clearance_scope` to the clearance a search runs with.

The grant comes from authentication only. A request may narrow it (ask for less), never
widen it: what it asks beyond the grant is dropped, the response says so, and nothing fails —
a caller asking for too much gets their grant, exactly as a caller asking for nothing does.
Pure functions; the HTTP layer calls them for every read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from uda.http.auth import Principal
from uda.query.clearance import Clearance


@dataclass(frozen=True, kw_only=True)
class ClearanceDecision:
    """The grant, what the request asked for (None: nothing), and what applies."""

    granted: Clearance
    requested: Clearance | None
    effective: Clearance

    @property
    def narrowed(self) -> bool:
        """Whether less than the grant applies."""
        return self.effective.entries() != self.granted.entries()

    @property
    def capped(self) -> bool:
        """Whether the request asked for something beyond the grant (and did not get it)."""
        return self.requested is not None and (self.requested.entries() != self.effective.entries())

    def to_dict(self) -> dict[str, Any]:
        """The decision as the response reports it."""
        return {
            "granted": self.granted.entries(),
            "requested": None if self.requested is None else self.requested.entries(),
            "effective": self.effective.entries(),
            "narrowed": self.narrowed,
            "capped": self.capped,
        }


def decide(principal: Principal, requested: Sequence[str] | None) -> ClearanceDecision:
    """The clearance a request of `principal` runs with.

    Args:
        principal: the authenticated caller; its grant is the upper bound.
        requested: the request's `clearance_scope`, or None when the request gave none (the
            whole grant applies).

    Raises:
        UnknownClearanceError: an entry of `requested` is malformed (naming it).
    """
    granted = principal.clearance
    if requested is None:
        return ClearanceDecision(granted=granted, requested=None, effective=granted)
    asked = Clearance.parse(requested)
    return ClearanceDecision(granted=granted, requested=asked, effective=granted.narrow(asked))
