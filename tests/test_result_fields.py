"""Result fields are cached by exact payload text: never stale, never shared mutably."""

from __future__ import annotations

import json

from connectors.contract.system_of_record import LazyJSON, StoredState
from uda.query.rows import RankedResult, ranked_rows


def _state(payload: dict[str, object], *, version: int = 1) -> StoredState:
    return StoredState(
        element_id="d1",
        version=version,
        hlc=1,
        element_type="Document",
        name=str(payload["name"]),
        sensitivity_rank=0,
        scope=None,
        timestamp_ms=0,
        tombstone=False,
        content_hash="h",
        payload=LazyJSON(json.dumps(payload)),
        filter_values=LazyJSON("{}"),
    )


def _row(state: StoredState) -> dict[str, object]:
    result = RankedResult(
        state=state,
        score=1.0,
        snippet="",
        decay=1.0,
        semantic_raw=None,
        lexical_raw=None,
        semantic_score=None,
        lexical_score=None,
        centrality=0.0,
        ranks={},
        contributions={},
    )
    return ranked_rows([result])[0]


def _payload(uri: str, **extras: str) -> dict[str, object]:
    return {"element_id": "d1", "name": "Doc", "text": "t", "uri": uri, "extras": extras}


def test_same_id_and_version_with_other_content_gets_its_own_fields() -> None:
    """A new store may reuse an id and version: the cache keys on the payload itself."""
    first = _row(_state(_payload("s3://a")))
    second = _row(_state(_payload("s3://b", team="x")))
    assert first["properties"]["uri"] == "s3://a"  # type: ignore[index]
    assert second["properties"]["uri"] == "s3://b"  # type: ignore[index]
    assert second["extras"] == [("team", "x")]


def test_changing_one_response_does_not_change_the_next() -> None:
    state = _state(_payload("s3://a", team="x"))
    first = _row(state)
    first["properties"]["uri"] = "tampered"  # type: ignore[index]
    again = _row(_state(_payload("s3://a", team="x")))
    assert again["properties"]["uri"] == "s3://a"  # type: ignore[index]
    assert again["extras"] == [("team", "x")]
