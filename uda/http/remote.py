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
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self, Unpack

import httpx
from pydantic import BaseModel

from uda.errors import ConfigError, ConnectorError, InvalidRequestError, PlanError
from uda.http.errors import AuthenticationError, ElementNotFoundError, PermissionDeniedError
from uda.http.wire import API_KEY_HEADER, ARROW_STREAM, read_stream
from uda.query.contracts import SearchOptions, SearchRequest
from uda.query.results import ArrowResponse
from uda.write.validation import ElementInput, RelationInput
from uda.write.writer import IngestReport

DEFAULT_TIMEOUT = 60.0  # a cold server loads its embedding model on the first search


class RemoteSearchResponse(ArrowResponse):
    """A search answered by the service: the views of `SearchResponse`, plus what applied.

    Attributes:
        clearance: `granted`, `requested`, `effective`, `narrowed`, `capped` (as the server
            reported them).
        query_id: the server's id of this search (its `X-Request-ID`).
    """

    def __init__(
        self,
        table: Any,
        explanation: Mapping[str, Any] | None,
        *,
        clearance: Mapping[str, Any],
        query_id: str | None,
    ) -> None:
        super().__init__(table, explanation)
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


def _search_body(
    query: str,
    limit: int,
    clearance_scope: Iterable[str] | None,
    context_filters: Mapping[str, Any] | None,
    options: SearchOptions,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "query": query,
        "limit": limit,
        "context_filters": dict(context_filters or {}),
        **options,
    }
    if clearance_scope is not None:
        fields["clearance_scope"] = list(clearance_scope)
    request = SearchRequest.build(**fields)
    return request.model_dump(mode="json", include=set(fields))


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
    )


def _ingest_report(response: httpx.Response) -> IngestReport:
    _raise_for_problem(response)
    return IngestReport(**response.json())


def _unreachable(base_url: str, exc: httpx.TransportError) -> ConnectorError:
    return ConnectorError("http", f"cannot reach {base_url}: {type(exc).__name__}: {exc}")


class RemoteClient:
    """The service at `url`, blocking; `search` and `ingest` as on `uda.Client`.

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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers=_headers(api_key, token),
            timeout=timeout,
            transport=transport,
        )

    def _post(self, path: str, body: dict[str, Any], accept: str) -> httpx.Response:
        try:
            return self._http.post(path, json=body, headers={"Accept": accept})
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc

    def search(
        self,
        query: str,
        limit: int = 5,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[SearchOptions],
    ) -> RemoteSearchResponse:
        """Search; see `uda.Client.search` (clearance_scope None: the whole grant).

        Raises:
            UserError: a bad request (checked here, or by the server), or bad credentials.
            ConnectorError: the service cannot be reached, or a backend behind it failed.
        """
        body = _search_body(query, limit, clearance_scope, context_filters, options)
        return _search_response(self._post("/v1/search", body, ARROW_STREAM))

    def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Write elements and relations (the credential must allow writing)."""
        body = _ingest_body(elements, relations)
        return _ingest_report(self._post("/v1/ingest", body, "application/json"))

    def close(self) -> None:
        """Close the connection pool. Idempotent."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncRemoteClient:
    """The service at `url`, for asyncio; the same arguments as `RemoteClient`."""

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
        query: str,
        limit: int = 5,
        clearance_scope: Iterable[str] | None = None,
        context_filters: Mapping[str, Any] | None = None,
        **options: Unpack[SearchOptions],
    ) -> RemoteSearchResponse:
        """Search; see `RemoteClient.search`."""
        body = _search_body(query, limit, clearance_scope, context_filters, options)
        return _search_response(await self._post("/v1/search", body, ARROW_STREAM))

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


__all__ = ["AsyncRemoteClient", "RemoteClient", "RemoteSearchResponse"]
