"""The shared ground of the discovery tests (tests/test_discovery.py,
test_discovery_surfaces.py): the clearance that sees everything, and the reference values —
counted from the corpus (test_paging's) with the clearance rule restated.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from test_paging import visible

from ontology import Element

EVERYONE = ["restricted", "project:*"]


def expected_values(
    clearance: list[str], field: str, elements: list[Element]
) -> list[tuple[Any, int]]:
    counted: Counter[Any] = Counter()
    for element in elements:
        if not visible(element, clearance):
            continue
        value = element.type_name() if field == "element_type" else getattr(element, field, None)
        if value is not None:
            counted[getattr(value, "value", value)] += 1
    return sorted(counted.items(), key=lambda item: (-item[1], str(item[0])))
