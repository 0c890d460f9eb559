"""A Python client for the HTTP service, with the local client's `search` and `ingest`.

`uda.connect("https://host")` returns a `RemoteClient`. Searches fetch the Arrow IPC stream
and answer with an `ArrowResponse`, so `to_arrow`, `results`, `to_elements` (with
`.repository`, `.decisions`, `.authors`), `explain()` and `to_pandas` work as they do
locally. The request is validated here first, so that bad input raises the same `UserError`
as the local client without a round trip; what only the server can judge comes back as a
problem document and is raised as the matching error.

Clearance is the server's decision: it derives it from the credential. `clearance_scope`
can only narrow it; leaving it out (None) asks for the whole grant — unlike the local client,
where no clearance means `public` only. The response's `clearance` says what applied.

`AsyncRemoteClient` does the work; `RemoteClient` is its blocking facade
(`uda.facade.SyncFacade`), as `uda.Client` is `uda.AsyncClient`'s.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self, Unpack
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from uda.errors import (
    BackendUnavailableError,
    ConfigError,
    ConnectorError,
    InvalidRequestError,
    PlanError,
    QueryNotFoundError,
    StoresBehindError,
)
from uda.facade import SyncFacade
from uda.http.errors import AuthenticationError, ElementNotFoundError, PermissionDeniedError
from uda.http.wire import API_KEY_HEADER, ARROW_STREAM, read_stream
from uda.query import discovery
from uda.query import export as exporting
from uda.query.aggregates import (
    AggregateOptions,
    AggregateRequest,
    AggregateResponse,
    aggregate_request,
)
from uda.query.contracts import SearchOptions, SearchRequest, search_request
from uda.query.export_reader import receive_export
from uda.query.results import ArrowResponse
from uda.write.validation import ElementInput, RelationInput
from uda.write.writer import IngestReport

DEFAULT_TIMEOUT = 60.0  # a cold server loads its embedding model on the first search


class RemoteSearchResponse(ArrowResponse):
    """A search answered by the service: the views of `SearchResponse`, plus what applied.

    Attributes:
        clearance: `granted`, `requested`, `effective`, `narrowed`, `capped` (as the server
            reported them).
        query_id: the saved search's id on the server (`rerun(query_id)` answers it again).
    """

    def __init__(
        self,
        table: Any,
        explanation: Mapping[str, Any] | None,
        *,
        clearance: Mapping[str, Any],
        query_id: str | None,
        next_cursor: str | None = None,
    ) -> None:
        super().__init__(table, explanation, next_cursor)
        self.clearance = dict(clearance)
        self.query_id = query_id


def _headers(api_key: str | None, token: str | None) -> dict[str, str]:
    api_key = api_key if api_key is not None else os.environ.get("UDA_API_KEY")
    token = token if token is not None else os.environ.get("UDA_TOKEN")
    if api_key and token:
        raise ConfigError("give an API key or a token, not both", field="api_key")
    if api_key:
        return {API_KEY_HEADER: api_key}
    if token:
        return {"Authorization": f"Bearer {token}"}
    return {}


def _search_body(request: SearchRequest) -> dict[str, Any]:
    # Only what the caller set: the server's defaults apply to the rest, and an unset
    # clearance_scope asks for the whole grant.
    return request.model_dump(mode="json", exclude_unset=True)


def _jsonable(item: Any) -> Any:
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json")
    if isinstance(item, tuple | list):
        return list(item)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return item


def _ingest_body(
    elements: Iterable[ElementInput], relations: Iterable[RelationInput]
) -> dict[str, Any]:
    return {
        "elements": [_jsonable(e) for e in elements],
        "relations": [_jsonable(r) for r in relations],
    }


def _raise_for_problem(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        problem: dict[str, Any] = response.json()
    except ValueError:
        problem = {}
    detail = str(problem.get("detail") or response.reason_phrase)
    field = problem.get("field")
    status = response.status_code
    if status == 401:
        raise AuthenticationError(detail)
    if status == 403:
        raise PermissionDeniedError(detail, field=field)
    if status == 404:
        raise ElementNotFoundError(detail, field=field)
    if status < 500:
        raise InvalidRequestError(detail, field=field)
    kind = str(problem.get("type", ""))
    if status == 503 and kind.endswith("backend-unavailable"):
        # A backend the service cannot answer without: the same error as a local client's.
        raise BackendUnavailableError(str(response.url.host), f"{status}: {detail}")
    if status == 503 and kind.endswith("stores-behind"):
        # Written, not yet everywhere: the same error as a local client's ingest.
        raise StoresBehindError({str(response.url.host): detail})
    if status in {502, 503, 504}:
        raise ConnectorError(str(response.url.host), f"{status}: {detail}")
    raise PlanError("remote", f"{status}: {detail}")


def _search_response(response: httpx.Response) -> RemoteSearchResponse:
    _raise_for_problem(response)
    table, extra = read_stream(response.content)
    return RemoteSearchResponse(
        table,
        extra.get("explain"),
        clearance=extra.get("clearance", {}),
        query_id=extra.get("query_id"),
        next_cursor=extra.get("next_cursor"),
    )


def _ingest_report(response: httpx.Response) -> IngestReport:
    _raise_for_problem(response)
    return IngestReport(**response.json())


def _unreachable(base_url: str, exc: httpx.TransportError) -> ConnectorError:
    return ConnectorError("http", f"cannot reach {base_url}: {type(exc).__name__}: {exc}")


class AsyncRemoteClient:
    """The service at `url`, for asyncio; `search`, `run` and `ingest` as on `uda.AsyncClient`.

    Unlike there, `clearance_scope=None` asks for the whole grant of the credential.

    Args:
        url: the service's base URL (`http://host:port`).
        api_key: an API key (default: `$UDA_API_KEY`).
        token: a bearer token instead of a key (default: `$UDA_TOKEN`).
        timeout: seconds per request.
        transport: an httpx transport (tests: an in-process app).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=_headers(api_key, token),
            timeout=timeout,
            transport=transport,
        )

    async def _post(self, path: str, body: dict[str, Any], accept: str) -> httpx.Response:
        try:
            return await self._http.post(path, json=body, headers={"Accept": accept})
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc

    async def search(
        self,
        query: str | None = None,
        limit: int = 5,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[SearchOptions],
    ) -> RemoteSearchResponse:
        """Search; see `uda.AsyncClient.search` (clearance_scope None: the whole grant).

        Raises:
            UserError: a bad request (checked here, or by the server), or bad credentials.
            ConnectorError: the service cannot be reached, or a backend behind it failed.
        """
        request = search_request(query, limit, clearance_scope, context_filters, **options)
        return await self.run(request)

    async def run(self, request: SearchRequest) -> RemoteSearchResponse:
        """Send one validated search request; the fields it leaves unset are the server's.

        Raises:
            UserError: what only the server can judge, or bad credentials.
            ConnectorError: the service cannot be reached, or a backend behind it failed.
        """
        return _search_response(await self._post("/v1/search", _search_body(request), ARROW_STREAM))

    async def rerun(
        self,
        query_id: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        clearance_scope: Iterable[str] | None = None,
    ) -> RemoteSearchResponse:
        """A search this credential's principal saved, again; see `uda.AsyncClient.rerun`.

        The server answers with the saved clearance narrowed by the principal's grant now
        and by `clearance_scope`, when given.

        Raises:
            QueryNotFoundError: no such query of this principal (another's reads the same).
            UserError: a cursor of another query, or bad credentials.
            ConnectorError: the service cannot be reached, or a backend behind it failed.
        """
        params: dict[str, Any] = {
            k: v for k, v in (("cursor", cursor), ("limit", limit)) if v is not None
        }
        if clearance_scope is not None:
            params["clearance_scope"] = list(clearance_scope)
        try:
            response = await self._http.get(
                f"/v1/queries/{quote(query_id, safe='')}",
                params=params,
                headers={"Accept": ARROW_STREAM},
            )
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        if response.status_code == 404:
            raise QueryNotFoundError(
                f"query_id: no saved query {query_id!r} of yours", field="query_id", value=query_id
            )
        return _search_response(response)

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Write elements and relations (the credential must allow writing)."""
        body = _ingest_body(elements, relations)
        return _ingest_report(await self._post("/v1/ingest", body, "application/json"))

    async def close(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def export(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        *,
        format: str = "arrow",
        sink: exporting.Sink,
        max_rows: int = exporting.DEFAULT_MAX_ROWS,
        page_size: int = exporting.PAGE_ROWS,
        progress: exporting.Progress | None = None,
        **options: Unpack[SearchOptions],
    ) -> exporting.ExportReport:
        """Export through the service (`POST /v1/export`); see `uda.AsyncClient.export`.

        The service streams an Arrow export, written to `sink` in `format` as it arrives
        (the same file a local export writes). `clearance_scope=None`: the whole grant.

        Raises:
            UserError: a bad request, format or `max_rows` (checked here, or by the server).
            ConnectorError: the service cannot be reached, failed, or cut the stream short.
        """
        request = search_request(query, page_size, clearance_scope, context_filters, **options)
        kind = exporting.check_export(format, max_rows)
        body = {**_search_body(request), "format": "arrow", "max_rows": max_rows}
        try:
            async with self._http.stream(
                "POST", "/v1/export", json=body, headers={"Accept": ARROW_STREAM}
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _raise_for_problem(response)
                return await receive_export(
                    response.aiter_bytes(),
                    format=kind,
                    sink=sink,
                    ranked=request.query is not None,
                    progress=progress,
                )
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc

    async def fields(
        self,
        prefix: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        *,
        values: bool = True,
    ) -> list[discovery.FilterPath]:
        """The filterable paths (`GET /v1/paths`); see `uda.AsyncClient.fields`.

        `clearance_scope=None` counts values over the whole grant.
        """
        params: list[tuple[str, str]] = [("values", "true" if values else "false")]
        if prefix is not None:
            params.append(("prefix", discovery.check_prefix(prefix)))
        if clearance_scope is not None:
            params += [("clearance_scope", e) for e in (list(clearance_scope) or ["public"])]
        response = await self._get("/v1/paths", params)
        return [discovery.FilterPath.model_validate(p) for p in response.json()["paths"]]

    async def operators(self) -> discovery.Operators:
        """The filter operators by field type (`GET /v1/definitions`)."""
        response = await self._get("/v1/definitions", [])
        return discovery.Operators.model_validate(response.json()["operators"])

    async def _get(self, path: str, params: list[tuple[str, str]]) -> httpx.Response:
        try:
            response = await self._http.get(path, params=tuple(params))
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        _raise_for_problem(response)
        return response

    async def aggregate(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[AggregateOptions],
    ) -> AggregateResponse:
        """Count the visible matches by group (`POST /v1/aggregate`).

        See `uda.AsyncClient.aggregate`; `clearance_scope=None` asks for the whole grant.
        """
        request = aggregate_request(query, clearance_scope, context_filters, **options)
        return await self.run_aggregate(request)

    async def run_aggregate(self, request: AggregateRequest) -> AggregateResponse:
        """Send one validated aggregate; the fields it leaves unset are the server's."""
        body = request.model_dump(mode="json", exclude_unset=True)
        response = await self._post("/v1/aggregate", body, "application/json")
        _raise_for_problem(response)
        data = response.json()
        return AggregateResponse.from_dict({**data, "clearance": data["clearance"]["effective"]})


class RemoteClient(SyncFacade[AsyncRemoteClient, RemoteSearchResponse]):
    """The service at `url`, blocking; `search`, `run` and `ingest` as on `uda.Client`.

    Unlike there, `clearance_scope=None` asks for the whole grant of the credential. The
    arguments are `AsyncRemoteClient`'s, except that `transport` may also be a blocking one
    (`httpx.HTTPTransport`, `httpx.WSGITransport`).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        twin = AsyncRemoteClient(
            url,
            api_key=api_key,
            token=token,
            timeout=timeout,
            transport=_as_async_transport(transport),
        )
        super().__init__(twin)

    @property
    def url(self) -> str:
        """The service's base URL."""
        return self._async.url

    def rerun(
        self,
        query_id: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        clearance_scope: Iterable[str] | None = None,
    ) -> RemoteSearchResponse:
        """A saved search again; see `AsyncRemoteClient.rerun`."""
        return self._call(
            self._async.rerun(query_id, cursor=cursor, limit=limit, clearance_scope=clearance_scope)
        )

    def aggregate(
        self,
        query: str | None = None,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[AggregateOptions],
    ) -> AggregateResponse:
        """Count the visible matches by group; see `AsyncRemoteClient.aggregate`."""
        request = aggregate_request(query, clearance_scope, context_filters, **options)
        return self.run_aggregate(request)

    def run_aggregate(self, request: AggregateRequest) -> AggregateResponse:
        """Send one validated aggregate; see `AsyncRemoteClient.run_aggregate`."""
        return self._call(self._async.run_aggregate(request))


def _as_async_transport(
    transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None,
) -> httpx.AsyncBaseTransport | None:
    if transport is None or isinstance(transport, httpx.AsyncBaseTransport):
        return transport
    return _ThreadedTransport(transport)


class _ThreadedTransport(httpx.AsyncBaseTransport):
    """A blocking transport under the async client, one worker thread per request.

    `RemoteClient` has always taken blocking transports (`httpx.HTTPTransport(retries=3)`,
    `httpx.WSGITransport`); since it drives the async client, it adapts them.
    """

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._transport = transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await asyncio.to_thread(self._send, request)

    def _send(self, request: httpx.Request) -> httpx.Response:
        response = self._transport.handle_request(request)
        if isinstance(response.stream, httpx.AsyncByteStream):
            return response  # a body given as bytes (as mock transports do) reads either way
        # The async client cannot read a blocking stream: read it here, raw, for the client
        # decodes any Content-Encoding itself.
        raw = b"".join(response.iter_raw())
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(raw),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await asyncio.to_thread(self._transport.close)


__all__ = ["AsyncRemoteClient", "RemoteClient", "RemoteSearchResponse"]
