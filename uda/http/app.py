"""The HTTP service: `create_app(client, auth)` builds a FastAPI app over an `AsyncClient`.

Every `/v1` route authenticates first; the principal's grant is the clearance, and a request
can only narrow it (`uda.http.grants`). `/healthz`, `/readyz` and `/metrics` are for probes
and scrapers and say nothing about the data. The app does not own the client's connections
unless asked to (`owns_client=True`, as `uda serve` does): then its lifespan opens and
closes them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

import uda
from ontology import json_schema
from uda.client.async_client import AsyncClient
from uda.http import access, grants, readiness
from uda.http.aggregate import install_aggregate
from uda.http.auth import Authenticator, Principal
from uda.http.data_routes import install_data_routes
from uda.http.deps import Caller, IngestBody, SearchBody, check_as_of
from uda.http.errors import PermissionDeniedError
from uda.http.metrics import CONTENT_TYPE, Metrics
from uda.http.middleware import JsonBodyGuard, RequestContext
from uda.http.models import (
    ClearanceOut,
    DegradedOut,
    ElementOut,
    ExplainOut,
    HealthOut,
    IngestIn,
    IngestOut,
    ReadyOut,
    SearchOut,
    json_answer,
)
from uda.http.openapi import ARROW_RESPONSE, PROBLEMS, body_schema, install_openapi
from uda.http.problems import install as install_problems
from uda.http.problems import request_id_of
from uda.http.wire import (
    ARROW_STREAM,
    CLEARANCE_HEADER,
    DEGRADED_HEADER,
    META_CLEARANCE,
    META_EXPLAIN,
    META_NEXT_CURSOR,
    META_QUERY_ID,
    NARROWED_HEADER,
    degraded_header,
    negotiate,
    stream_chunks,
)
from uda.query.clearance import Clearance
from uda.query.contracts import SearchRequest
from uda.query.results import SearchResponse, search_result
from uda.write.validation import coerce_elements, coerce_relations

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: thousands of elements, far beyond any search


def _freeze_start_up_heap() -> None:
    """Collect once, then leave what start-up made (model, stores, routes) out of later GCs.

    A full collection walks every tracked object; after start-up that is mostly the
    embedding model's, the stores' and the app's, which live as long as the process. Each
    full collection of the service took 0.16 to 0.24 s every 2 to 3 s under load, with the event
    loop stopped; frozen, 0.01 to 0.06 s (ADR 58). Objects made later are collected as before.
    """
    gc.collect()
    gc.freeze()


def create_app(
    client: AsyncClient,
    auth: Authenticator,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    readiness_timeout: float = 2.0,
    owns_client: bool = False,
    freeze_start_up_heap: bool = False,
) -> FastAPI:
    """Build the HTTP service over `client`.

    Args:
        client: the UDA client answering the requests.
        auth: who may call, with what clearance (see `uda.http.auth`).
        max_body_bytes: requests with a larger body get 413 before anything parses them.
        readiness_timeout: seconds each backend has to answer `/readyz`.
        owns_client: open the client on startup and close it on shutdown (`uda serve`).
        freeze_start_up_heap: once started, move every object alive then out of the
            garbage collector's sight (`uda serve`, whose process is the service's own;
            see `_freeze_start_up_heap`).
    """
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncGenerator[None]:
        if owns_client:
            await client.open()
            # Load the model now, so that the first caller does not wait for it.
            await asyncio.to_thread(client.embedder.embed_query, "warm up")
        if freeze_start_up_heap:
            _freeze_start_up_heap()
        try:
            yield
        finally:
            if freeze_start_up_heap:
                gc.unfreeze()  # an app started again in the same process freezes afresh
            if owns_client:
                await client.close()

    app = FastAPI(
        title="UDA",
        version=uda.__version__,
        description="One clearance-aware hybrid search over vector, graph and relational "
        "backends. Results as JSON or as an Arrow IPC stream.",
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    app.state.auth = auth
    install_problems(app, auth)
    app.add_middleware(JsonBodyGuard, max_bytes=max_body_bytes)
    app.add_middleware(RequestContext, metrics=metrics)

    async def answer(
        caller: Principal, body: SearchRequest
    ) -> tuple[SearchResponse, grants.ClearanceDecision]:
        check_as_of(body)
        asked = body.clearance_scope if "clearance_scope" in body.model_fields_set else None
        decision = grants.decide(caller, asked)
        # The body is validated already; only its clearance gives way to the decision's.
        request = body.model_copy(update={"clearance_scope": decision.effective.entries()})
        response = await client.run(request, owner=caller.name)
        metrics.record_phases(response.plan.timings_ms)
        return response, decision

    def clearance_headers(decision: grants.ClearanceDecision) -> dict[str, str]:
        return {
            CLEARANCE_HEADER: ",".join(decision.effective.entries()),
            NARROWED_HEADER: "true" if decision.narrowed else "false",
        }

    @app.post(
        "/v1/search",
        response_model=SearchOut,
        responses={**PROBLEMS, 406: {}, 200: ARROW_RESPONSE},
        openapi_extra=body_schema(SearchRequest),
        summary="Search: JSON by default, an Arrow IPC stream when Accept asks for it",
    )
    async def search(request: Request, caller: Caller, body: SearchBody) -> Response:
        wanted = negotiate(request.headers.get("accept"))
        if wanted is None:
            raise _not_acceptable()
        response, decision = await answer(caller, body)
        return respond(wanted, response, decision)

    @app.get(
        "/v1/queries/{query_id}",
        response_model=SearchOut,
        responses={**PROBLEMS, 404: {}, 406: {}, 200: ARROW_RESPONSE},
        summary="A saved search again: its first page as it was answered, or a cursor's page "
        "(only for the principal who made it; 404 otherwise, as for a missing id)",
    )
    async def saved_search(
        request: Request,
        caller: Caller,
        query_id: Annotated[str, Path(min_length=1, max_length=64)],
        cursor: Annotated[str | None, Query(min_length=1, max_length=2000)] = None,
        limit: Annotated[int | None, Query(ge=1, le=100)] = None,
        clearance_scope: Annotated[
            list[str] | None,
            Query(
                max_length=64,
                description="Narrow the saved clearance further (as an agent acting for a "
                "less cleared user does); never widens it.",
            ),
        ] = None,
    ) -> Response:
        wanted = negotiate(request.headers.get("accept"))
        if wanted is None:
            raise _not_acceptable()
        saved = await client.saved_query(query_id, owner=caller.name)
        # The grant may have shrunk since: the rerun runs with what it allows now.
        asked = Clearance.parse(saved.request.clearance_scope)
        if clearance_scope is not None:
            asked = asked.narrow(Clearance.parse(clearance_scope))
        decision = grants.decide(caller, asked.entries())
        response = await client.rerun(
            query_id,
            owner=caller.name,
            cursor=cursor,
            limit=limit,
            clearance_scope=decision.effective.entries(),
        )
        metrics.record_phases(response.plan.timings_ms)
        return respond(wanted, response, decision)

    def respond(
        wanted: str, response: SearchResponse, decision: grants.ClearanceDecision
    ) -> Response:
        query_id = response.query_id or ""
        headers = clearance_headers(decision)
        if response.degraded:
            headers[DEGRADED_HEADER] = degraded_header(response.degraded)
            metrics.record_degraded(response.degraded)
        explanation = response.explain().to_dict()
        if wanted == "arrow":
            extra = {
                META_EXPLAIN: explanation,
                META_CLEARANCE: decision.to_dict(),
                META_QUERY_ID: query_id,
                META_NEXT_CURSOR: response.next_cursor,
            }
            chunks: Iterator[bytes] = stream_chunks(response.to_batches(), extra)
            return StreamingResponse(chunks, media_type=ARROW_STREAM, headers=headers)
        out = SearchOut.model_validate(
            {
                "query_id": query_id,
                "clearance": decision.to_dict(),
                "results": response.results,
                "plan": explanation["plan"],
                "next_cursor": response.next_cursor,
                "degraded": [d.to_dict() for d in response.degraded],
            }
        )
        return json_answer(out, headers=headers)

    @app.post(
        "/v1/explain",
        response_model=ExplainOut,
        responses=PROBLEMS,
        openapi_extra=body_schema(SearchRequest),
        summary="The plan and every leg's rank, score and contribution per result",
    )
    async def explain(request: Request, caller: Caller, body: SearchBody) -> Response:
        response, decision = await answer(caller, body)
        explanation = response.explain()
        data = explanation.to_dict()
        out = ExplainOut(
            query_id=request_id_of(request) or "",
            clearance=ClearanceOut.model_validate(decision.to_dict()),
            plan=data["plan"],
            results=data["results"],
            text=str(explanation),
        )
        return json_answer(out, headers=clearance_headers(decision))

    @app.post(
        "/v1/ingest",
        response_model=IngestOut,
        responses={**PROBLEMS, 403: {}},
        openapi_extra=body_schema(IngestIn),
        summary="Write elements and relations (principals with can_write only)",
    )
    async def ingest(caller: Caller, body: IngestBody) -> IngestOut:
        if not caller.can_write:
            raise PermissionDeniedError(f"{caller.name!r} may not write", field="Authorization")
        elements = coerce_elements(body.elements)
        relations = coerce_relations(body.relations)
        await access.check_writable(
            client.connectors, caller, elements, relations, body.elements, guard=client.guard()
        )
        report = await client.ingest(elements, relations)
        return IngestOut.model_validate(dataclasses.asdict(report))

    @app.get(
        "/v1/elements/{element_id:path}",
        response_model=ElementOut,
        responses={**PROBLEMS, 404: {}},
        summary="One element with its context nodes (404 when missing or not visible)",
    )
    async def element(
        caller: Caller,
        element_id: Annotated[str, Path(min_length=1, max_length=512)],
        response: Response,
        expand_depth: Annotated[int, Query(ge=0, le=2)] = 1,
    ) -> ElementOut:
        guard = client.guard()
        row = await access.lookup(
            client.connectors,
            element_id,
            caller.clearance,
            expand_depth=expand_depth,
            max_context_nodes=client.profile.search.max_context_nodes,
            guard=guard,
        )
        found = search_result(row)
        if guard.degraded:
            response.headers[DEGRADED_HEADER] = degraded_header(guard.degraded)
        return ElementOut(
            element_id=found.element_id,
            element_type=found.element_type,
            name=found.name,
            properties=found.properties,
            context_nodes=found.context_nodes,
            degraded=[DegradedOut.model_validate(d.to_dict()) for d in guard.degraded],
        )

    @app.get("/v1/ontology", responses=PROBLEMS, summary="JSON Schema of every element type")
    async def ontology(caller: Caller) -> dict[str, Any]:
        return json_schema()

    @app.get("/healthz", response_model=HealthOut, summary="Liveness")
    async def healthz() -> HealthOut:
        return HealthOut()

    @app.get(
        "/readyz",
        response_model=ReadyOut,
        responses={503: {"model": ReadyOut, "description": "a backend did not answer"}},
        summary="Readiness: one cheap probe per backend",
    )
    async def readyz() -> Response:
        connectors = client.connectors
        statuses = (
            await readiness.probe_all(connectors, client.embedder.dimension, readiness_timeout)
            if connectors
            else []
        )
        ready = bool(statuses) and all(s.ok for s in statuses)
        out = ReadyOut.model_validate(
            {
                "status": "ready" if ready else "unavailable",
                "backends": [dataclasses.asdict(s) for s in statuses],
            }
        )
        return json_answer(out, status_code=200 if ready else 503)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        summary="Prometheus metrics (text exposition format)",
    )
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(
            metrics.render(client.circuit_states(), client.read_counts()), media_type=CONTENT_TYPE
        )

    install_data_routes(app, client, answer=answer, headers=clearance_headers)
    install_aggregate(app, client)
    install_openapi(app)
    return app


def _not_acceptable() -> Exception:
    return HTTPException(406, f"this resource is available as application/json or {ARROW_STREAM}")
