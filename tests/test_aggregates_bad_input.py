"""Bad input to `client.aggregate` is refused with an error naming the field, and a hint."""

from __future__ import annotations

from typing import Any

import pytest

import uda
from uda.errors import InvalidAggregateError, InvalidRequestError

# -- bad input names the field -----------------------------------------------------------------
CATALOGUE = InvalidAggregateError
REQUEST = InvalidRequestError


@pytest.mark.parametrize(
    ("fields", "error", "field", "hint"),
    [
        ({"group_by": ["stauts"]}, CATALOGUE, "group_by.0", "'status'"),
        ({"group_by": ["status", "partOff.name"]}, CATALOGUE, "group_by.1", "'partOf'"),
        ({"group_by": ["partOf.nmae"]}, CATALOGUE, "group_by.0", "'name'"),
        ({"group_by": ["partOf.a.b"]}, CATALOGUE, "group_by.0", "one hop"),
        ({"temporal": ("name", "month")}, CATALOGUE, "temporal", "timestamp"),
        ({"metric": "avg", "metric_field": "status"}, CATALOGUE, "metric_field", "confidence"),
        ({"temporal": ("timestamp", "fortnight")}, REQUEST, "temporal.1", "month"),
        ({"metric": "avg"}, REQUEST, "metric_field", "needs"),
        ({"metric": "count", "metric_field": "confidence"}, REQUEST, "metric_field", "count"),
        ({"metric": "median", "metric_field": "confidence"}, REQUEST, "metric", "avg"),
        ({"group_by": ["status", "status"]}, REQUEST, "group_by", "once"),
        ({"group_by": ["a", "b", "c", "d"]}, REQUEST, "group_by", "3"),
        ({"unknown": 1}, REQUEST, "unknown", "xtra"),
        (
            {"context_filters": {"stauts": "x"}},
            uda.UnknownFilterFieldError,
            "context_filters.stauts",
            "'status'",
        ),
        (
            {"element_types": ["Repository"]},
            uda.UnknownElementTypeError,
            "element_types",
            "Document",
        ),
        ({"clearance_scope": ["secret"]}, uda.UnknownClearanceError, "clearance_scope", "project:"),
    ],
)
def test_bad_input_names_the_field(
    client: uda.Client, fields: dict[str, Any], error: type[Exception], field: str, hint: str
) -> None:
    with pytest.raises(error) as caught:
        client.aggregate(**fields)
    assert isinstance(caught.value, uda.UserError)
    assert caught.value.field == field
    assert hint in str(caught.value)
