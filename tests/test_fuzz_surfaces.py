"""Fuzzing the surfaces beside HTTP (which tests/test_http_fuzz.py covers with schemathesis).

Any generated input ends in an answer or a `UserError` (CLI: exit 0 or 2; a tool: an answer
or a validation or user error), never another exception. The stores are real (embedded);
the number of examples is bounded so that the suite stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import uda
from ontology import Decision, DecisionStatus, Document, Sensitivity
from uda.agent.catalog import TOOLS
from uda.agent.deps import UDADeps
from uda.cli.commands import EXIT_OK, EXIT_USAGE, main
from uda.embedding import Embedder
from uda.errors import UserError
from uda.query.aggregates.request import AggregateOptions
from uda.query.contracts import SearchOptions

ELEMENTS = [
    Document(
        element_id="doc:retries",
        name="Retry policy",
        text="Failed payment calls are retried three times with exponential backoff.",
        sensitivity=Sensitivity.PUBLIC,
    ),
    Decision(
        element_id="adr:7",
        name="Retry payments with idempotency keys",
        text="We retry failed payment calls with an idempotency key per attempt.",
        status=DecisionStatus.ACCEPTED,
        sensitivity=Sensitivity.INTERNAL,
    ),
]
FEW = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.sampled_from([math.nan, math.inf, "", "\x00", "\ud800", "accepted", "-timestamp"])
    | st.text(max_size=30)
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "store"
    with uda.connect(path=path, embedder=embedder) as client:
        client.ingest(ELEMENTS)
    return path


# -- the command line -----------------------------------------------------------------------
def option_values() -> st.SearchStrategy[list[str]]:
    text = st.text(max_size=40)
    numbers = st.integers(min_value=-5, max_value=500).map(str) | text
    return st.one_of(
        st.tuples(st.just("--limit"), numbers),
        st.tuples(st.just("--clearance"), st.sampled_from(["public", "internal", "top"]) | text),
        st.tuples(st.just("--filter"), text),
        st.tuples(st.just("--where"), json_like.map(repr) | text),
        st.tuples(st.just("--depth"), numbers),
        st.tuples(st.just("--format"), st.sampled_from(["table", "json", "arrow", "csv"])),
        st.tuples(st.just("--as-of"), text | st.just("2025-06-01T00:00:00Z")),
        st.tuples(st.just("--order-by"), text),
        st.tuples(st.just("--cursor"), text),
        st.tuples(st.just("--type"), st.sampled_from(["Document", "Decision", "Nope"]) | text),
        st.tuples(st.just("--fields"), st.sampled_from(["text", "*", "extras", "txet"]) | text),
    ).map(list)


@FEW
@given(
    query=st.none() | st.text(min_size=1, max_size=60),
    options=st.lists(option_values(), max_size=4),
)
def test_cli_search_arguments(
    store: Path,
    tmp_path: Path,
    query: str | None,
    options: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--path", str(store), "search", *([] if query is None else [query])]
    for pair in options:
        argv += pair
    if "arrow" in argv:
        argv += ["--output", str(tmp_path / "out.arrow")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal of a malformed command line
        code = exc.code
    event(f"exit {code}")
    capsys.readouterr()
    assert code in (EXIT_OK, EXIT_USAGE), argv


# -- the Python API --------------------------------------------------------------------------
SEARCH_ARGUMENTS = [
    "query",
    "limit",
    "clearance_scope",
    "context_filters",
    *SearchOptions.__annotations__,
]


@FEW
@given(
    arguments=st.dictionaries(
        st.sampled_from([*SEARCH_ARGUMENTS, "unknown"]), json_like, max_size=4
    )
)
def test_python_search_arguments(
    store: Path, embedder: Embedder, arguments: dict[str, Any]
) -> None:
    """`search` with any keyword arguments: an answer or a `UserError`, sync and async."""
    kwargs: dict[str, Any] = {"query": "payment retries", **arguments}
    with uda.connect(path=store, embedder=embedder) as client:
        _answer_or_user_error(client.search, kwargs)

    async def run() -> None:
        async with uda.aconnect(path=store, embedder=embedder) as client:
            with contextlib.suppress(UserError):
                await client.search(**kwargs)

    asyncio.run(run())


AGGREGATE_ARGUMENTS = [
    "query",
    "clearance_scope",
    "context_filters",
    *AggregateOptions.__annotations__,
]


@FEW
@given(
    arguments=st.dictionaries(
        st.sampled_from([*AGGREGATE_ARGUMENTS, "unknown"]), json_like, max_size=4
    )
)
def test_python_aggregate_arguments(
    store: Path, embedder: Embedder, arguments: dict[str, Any]
) -> None:
    """`aggregate` with any keyword arguments: an answer or a `UserError`."""
    with uda.connect(path=store, embedder=embedder) as client:
        _answer_or_user_error(client.aggregate, arguments)


def _answer_or_user_error(call: Any, kwargs: dict[str, Any]) -> None:
    """Call with the keywords; a `UserError` is a fine end, any other exception fails."""
    try:
        call(**kwargs)
        event("answered")
    except UserError:
        event("a user error")


# -- the agent tools (the functions behind MCP and the pydantic-ai toolset) -----------------
READ_TOOLS = [spec for spec in TOOLS if not spec.writes_files]
PLAUSIBLE: dict[str, object] = {"query": "payment retries", "query_id": "q1", "rank": 1}


@st.composite
def tool_arguments(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A read tool, its required fields filled plausibly, then some of its fields fuzzed."""
    spec = draw(st.sampled_from(READ_TOOLS))
    fields = spec.args_model.model_fields
    arguments: dict[str, Any] = {
        name: PLAUSIBLE.get(name, "x") for name, info in fields.items() if info.is_required()
    }
    names = st.sampled_from([*fields, "unknown"]) if fields else st.just("unknown")
    for name in draw(st.lists(names, max_size=3)):
        arguments[name] = draw(json_like)
    return spec.name, arguments


@FEW
@given(call=tool_arguments())
def test_tool_arguments(store: Path, call: tuple[str, dict[str, Any]]) -> None:
    name, arguments = call
    spec = next(s for s in TOOLS if s.name == name)

    async def run() -> None:
        async with uda.aconnect(path=store) as client:
            deps = UDADeps(client=client, clearance_scope=["internal"])
            try:
                args = spec.args_model.model_validate(arguments)
            except ValidationError:
                event("refused by the tool's schema")  # a retry for the model
                return
            try:
                await spec.run(deps, args)
            except UserError:
                event("a user error")
                return
            event("answered")

    asyncio.run(run())
