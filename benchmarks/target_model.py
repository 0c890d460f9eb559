"""What a target is, and how targets find the rows they judge."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Target:
    """One target of issue 6 and where the run stands."""

    id: str
    description: str
    target: str
    figure: float | None
    met: bool | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "id": self.id,
            "description": self.description,
            "target": self.target,
            "figure": self.figure,
            "met": self.met,
            "status": "met" if self.met else "missed" if self.met is False else "not measured",
            "detail": self.detail,
        }


def find(rows: Iterable[Mapping[str, Any]], **where: Any) -> list[Mapping[str, Any]]:
    """The rows whose fields equal `where`'s."""
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def params(row: Mapping[str, Any], key: str) -> Any:
    """A row's configuration value (None when absent)."""
    return row.get("params", {}).get(key)
