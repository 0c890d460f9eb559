"""The agent tools and filters: the model's mistakes (a wrong argument, an unknown filter
field, a bad operator) come back as retries with guidance; the filter fields, element types
and relations it can discover; and filter trees with relation paths.

Scripted models and the corpus are tests/agent_fixtures.py's.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_fixtures import (
    Script,
    _no_real_models,
    aclient,
    agent,
    answer_of,
    call,
    deps,
    returns,
    say,
)

from connectors.contract.predicates import Op
from uda.agent import UDADeps
from uda.agent.models import ListFieldsArgs, NoArgs, RefineArgs, SearchArgs
from uda.agent.tools import list_element_types, list_filter_fields, refine_search, search
from uda.errors import UnknownElementTypeError, UnknownFilterFieldError
from uda.query.filters import parse_filters

__all__ = ["_no_real_models", "aclient", "deps"]  # fixtures


# -- mistakes come back as retries with guidance ----------------------------------------
async def test_invalid_arguments_are_retried_with_the_validation_message(deps: UDADeps) -> None:
    script = Script(
        call("search", limit=0),
        call("get_result", query_id="q9", rank=1),
        call("search", query="payment retries", element_types=["Pamphlet"]),
        call("search", query="payment retries"),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    invalid = returns(script.seen[1])[0]
    assert invalid.outcome == "retried"
    text = invalid.model_response_str()
    assert "query" in text
    assert "Field required" in text
    assert "greater than or equal to 1" in text
    unknown_query = returns(script.seen[2])[0]
    assert unknown_query.outcome == "retried"
    assert "no searches in this conversation yet" in unknown_query.model_response_str()
    bad_type = returns(script.seen[3])[0].model_response_str()
    assert "'Pamphlet' is not a searchable element type" in bad_type
    assert "Document" in bad_type
    assert answer_of(script.seen[4])["hits"]


async def test_unknown_filter_field_gets_a_suggestion_not_an_empty_result(deps: UDADeps) -> None:
    script = Script(
        call("search", query="payment retries", filters={"stauts": "accepted"}),
        call("search", query="payment retries", filters={"status": "accepted"}),
        say("done"),
    )
    await agent().run("q", deps=deps, model=script.model)
    (part,) = returns(script.seen[1])
    assert part.outcome == "retried"
    guidance = part.model_response_str()
    assert "no field named 'stauts'; did you mean 'status'?" in guidance
    assert "list_filter_fields" in guidance
    assert [h["element_id"] for h in answer_of(script.seen[2])["hits"]] == ["adr:7"]


async def test_bad_operator_and_operand_are_explained(deps: UDADeps) -> None:
    with pytest.raises(Exception, match="status"):
        SearchArgs.model_validate({"query": "x", "filters": {"status": {"$regex": "acc"}}})
    # `$like` is an operator now, but only for strings: on an enumeration it is explained.
    with pytest.raises(UnknownFilterFieldError, match=r"\$like compares strings"):
        await search(deps, SearchArgs(query="x", filters={"status": {"$like": "acc%"}}))
    with pytest.raises(UnknownFilterFieldError, match="expected one of"):
        await search(deps, SearchArgs(query="x", filters={"status": "maybe"}))


# -- discovery --------------------------------------------------------------------------
async def test_filter_fields_come_with_types_values_and_operators(deps: UDADeps) -> None:
    answer = await list_filter_fields(deps, ListFieldsArgs())
    fields = {f.name: f for f in answer.fields}
    assert fields["status"].type == "enum"
    assert "accepted" in (fields["status"].values or [])
    assert fields["status"].operators == ["$eq", "$ne", "$in", "$nin", "$exists"]
    assert fields["status"].element_types == ["Decision"]
    assert fields["timestamp"].type.startswith("datetime")
    assert "$gte" in fields["timestamp"].operators
    assert fields["confidence"].type == "number"
    assert "Decision" in (fields["element_type"].values or [])
    assert "text" not in fields
    assert "$gte" in answer.syntax
    decision = {
        f.name
        for f in (await list_filter_fields(deps, ListFieldsArgs(element_type="Decision"))).fields
    }
    assert {"status", "decided_on", "element_type"} <= decision
    assert "email" not in decision
    with pytest.raises(UnknownElementTypeError, match="did you mean 'Decision'"):
        await list_filter_fields(deps, ListFieldsArgs(element_type="Decisoin"))


_SAMPLES = {"enum": None, "boolean": True, "integer": 3, "number": 0.5, "string": "x"}


async def test_every_listed_field_and_operator_is_accepted_by_the_parser(deps: UDADeps) -> None:
    for field in (await list_filter_fields(deps, ListFieldsArgs())).fields:
        sample: Any = (
            (field.values or ["x"])[0]
            if field.type == "enum"
            else _SAMPLES.get(field.type, "2025-01-01")
        )
        for op in field.operators:
            operand = {
                Op.IN: [sample],
                Op.NIN: [sample],
                Op.BETWEEN: [sample, sample],
                Op.EXISTS: True,
            }.get(Op(op), sample)
            assert parse_filters({field.name: {op: operand}}), (field.name, op)


async def test_element_types_and_relations_are_listed(deps: UDADeps) -> None:
    types = {t.name: t for t in (await list_element_types(deps, NoArgs())).element_types}
    assert types["Document"].searchable
    assert not types["Person"].searchable
    assert "status" in types["Decision"].fields
    assert "supersedes" in types["Decision"].relations_out
    script = Script(call("list_relations"), say("done"))
    await agent().run("q", deps=deps, model=script.model)
    relations = {r["name"]: r for r in answer_of(script.seen[1])["relations"]}
    assert relations["governedBy"]["targets"] == ["Decision"]


# -- filter trees --------------------------------------------------------------------------
async def test_search_takes_a_filter_tree_with_relation_paths(deps: UDADeps) -> None:
    tree = {"$or": [{"partOf.name": "payments"}, {"~supersedes.status": "accepted"}]}
    answer = await search(deps, SearchArgs(query="payment retries", where=tree))
    assert sorted(h.element_id for h in answer.hits) == ["adr:3", "doc:retries"]
    assert answer.where == tree
    # ANDed with the flat filters; a refinement keeps the tree unless it replaces it.
    narrowed = await search(
        deps, SearchArgs(query="payment retries", where=tree, filters={"element_type": "Decision"})
    )
    assert [h.element_id for h in narrowed.hits] == ["adr:3"]
    kept = await refine_search(deps, RefineArgs(query_id=answer.query_id, limit=1))
    assert kept.where == tree
    dropped = await refine_search(deps, RefineArgs(query_id=answer.query_id, where={}))
    assert dropped.where is None
    assert len(dropped.hits) > len(answer.hits)


async def test_a_bad_tree_is_explained_with_its_path(deps: UDADeps) -> None:
    with pytest.raises(UnknownFilterFieldError) as caught:
        await search(deps, SearchArgs(query="x", where={"$or": [{"partOf.nmae": "payments"}]}))
    assert caught.value.field == "context_filters.$or[0].partOf.nmae"
    assert "did you mean 'name'" in str(caught.value)
