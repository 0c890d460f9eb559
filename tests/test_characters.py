"""One rule for NUL and lone surrogates, on every profile (connectors/contract/characters.py).

PostgreSQL cannot store them and SQLite can: UDA refuses both at the door, with the same
error naming the field on the embedded and the server profile, in elements, relations and
requests alike. Other control characters are kept as they are, on both profiles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import uda
from connectors.contract.characters import forbidden_character
from ontology import Document, Sensitivity
from uda.config import load_profile
from uda.embedding import Embedder
from uda.errors import InvalidElementError, InvalidRequestError, UnknownFilterFieldError

PUBLIC = Sensitivity.PUBLIC


def test_the_rule() -> None:
    assert forbidden_character("plain text, tabs\tand\nnewlines, \x07 bell, \x1f") is None
    assert forbidden_character("a\x00b") == "a NUL character (U+0000) at position 1"
    assert forbidden_character("ab\ud800") == "a lone surrogate (U+D800) at position 2"
    assert forbidden_character("🚀 paired") is None


BAD_ELEMENTS = [
    ({"element_type": "Document", "element_id": "d", "name": "N", "text": "a\x00b"}, "text"),
    ({"element_type": "Document", "element_id": "d", "name": "N\x00", "text": "ok"}, "name"),
    ({"element_type": "Document", "element_id": "d\x00", "name": "N", "text": "ok"}, "element_id"),
    ({"element_type": "Document", "element_id": "d", "name": "N", "text": "a\udfffb"}, "text"),
]


def refused(client: uda.Client, element: dict[str, Any]) -> InvalidElementError:
    with pytest.raises(InvalidElementError) as caught:
        client.ingest(
            [Document(element_id="ok", name="Fine", text="Fine.", sensitivity=PUBLIC), element]
        )
    return caught.value


@pytest.mark.parametrize(("element", "field"), BAD_ELEMENTS)
def test_embedded_refuses_and_writes_nothing(
    client: uda.Client, element: dict[str, Any], field: str
) -> None:
    error = refused(client, element)
    assert error.field == f"elements[1].{field}"
    # Ids refuse every control character already (the ontology's rule for ids), and pydantic
    # refuses a lone surrogate in any string field: the same error on every profile too.
    if field != "element_id" and "\x00" in str(element[field]):
        assert "on every profile" in str(error)
    assert client.element_ids() == []  # the whole batch, not half of it


def test_relations_and_requests_too(client: uda.Client) -> None:
    client.ingest([Document(element_id="a", name="A", text="Alpha.", sensitivity=PUBLIC)])
    with pytest.raises(InvalidElementError) as caught:
        client.ingest([], [("a", "relatedTo", "b\x00")])
    assert caught.value.field == "relations[0].target_id"
    with pytest.raises(InvalidRequestError) as asked:
        client.search("alpha\x00", clearance_scope=["public"])
    assert asked.value.field == "query"
    with pytest.raises(UnknownFilterFieldError) as filtered:  # a filter's mistake, as always
        client.search("alpha", clearance_scope=["public"], context_filters={"name": "A\x00"})
    assert filtered.value.field == "context_filters.name"


def test_other_control_characters_are_kept(client: uda.Client) -> None:
    text = "Bell \x07 and unit separator \x1f stay, as do tabs\tand newlines."
    client.ingest([Document(element_id="c", name="Controls\x1b", text=text, sensitivity=PUBLIC)])
    found = client.search("bell unit separator", clearance_scope=["public"], limit=1).results[0]
    assert found.name == "Controls\x1b"
    assert found.properties["text"] == text


@pytest.mark.slow
def test_the_server_profile_gives_the_same_answers(
    server_profile_file: Path, embedder: Embedder
) -> None:
    with (
        uda.Client(load_profile(server_profile_file), embedder=embedder) as server,
        uda.connect(path=server_profile_file.parent / "embedded", embedder=embedder) as embedded,
    ):
        for element, _ in BAD_ELEMENTS:
            assert str(refused(server, element)) == str(refused(embedded, element))
        text = "Bell \x07 and unit separator \x1f stay."
        for client in (server, embedded):
            client.ingest(
                [Document(element_id="c", name="Controls\x1b", text=text, sensitivity=PUBLIC)]
            )
            found = client.search("bell unit separator", clearance_scope=["public"], limit=1)
            assert found.results[0].properties["text"] == text
