"""How the ArcadeDB connector reaches the engine: in process (JPype) or over the HTTP API.

Both backends run the same SQL and OpenCypher text with named parameters; the connector
never knows which one it talks to. Every failure leaves as `ConnectorError("arcadedb", ...)`,
raised from the engine's (or httpx's) own exception.

Embedded mode: the engine lives in a JVM inside this process. Its calls block, so each unit
of work (a read, or a whole write transaction) runs in one worker thread: ArcadeDB binds a
transaction to the thread that began it, and JPype attaches worker threads to the JVM by
itself. Writes are serialised by a lock (concurrent writers would only fight over the same
pages and retry); reads run concurrently.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import httpx

from connectors.arcadedb.jvm import DEFAULT_HEAP, start_jvm
from connectors.contract.errors import ConnectorError, TransientBackendError, UserError

T = TypeVar("T")
Row = dict[str, Any]
Language = Literal["sql", "cypher"]
Statement = tuple[Language, str, Mapping[str, Any]]

NAME = "arcadedb"


class Backend(ABC):
    """One way of running statements against one ArcadeDB database."""

    @abstractmethod
    async def open(self) -> None:
        """Open the database, creating it when missing. Idempotent."""

    @abstractmethod
    async def close(self) -> None:
        """Release the database. Idempotent."""

    @property
    @abstractmethod
    def is_open(self) -> bool:
        """Whether `open()` has succeeded and `close()` has not run since."""

    @abstractmethod
    async def ddl(self, commands: Sequence[str]) -> None:
        """Run schema commands (fixed SQL text), each on its own, outside a transaction."""

    @abstractmethod
    async def query(self, language: Language, command: str, params: Mapping[str, Any]) -> list[Row]:
        """Run one read-only statement; every row, never truncated."""

    @abstractmethod
    async def write(self, statements: Sequence[Statement]) -> None:
        """Run write statements in order (embedded: in one transaction)."""


# Failures of a connection that was open: reset, closed by the server mid-answer. Not a
# refused connection (the server is down) nor a timeout (the deadline decides).
_DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def _fail(message: str, exc: BaseException) -> ConnectorError:
    return ConnectorError(NAME, f"{message}: {_name(exc)}")


def _name(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# -- embedded -----------------------------------------------------------------------------
class EmbeddedBackend(Backend):
    """The engine in this process, its database under `<path>/database`.

    Args:
        path: folder of the connector (the database, and the JVM's logging configuration).
        heap: the JVM's maximum heap, when this backend is the one that starts the JVM.
    """

    def __init__(self, path: Path, heap: str = DEFAULT_HEAP) -> None:
        if importlib.util.find_spec("arcadedb_embedded") is None:
            raise UserError(
                "the embedded ArcadeDB connector needs the arcadedb-embedded package: "
                "pip install 'uda-query[server]' (or pass url= to use a running server)",
                field="path",
                value=str(path),
            )
        self._path = path
        self._heap = heap
        self._db: Any = None
        self._write_lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        """Whether the database is open."""
        return self._db is not None

    async def _run(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(fn)
        except ConnectorError:
            raise
        except Exception as exc:  # ArcadeDBError, and Java exceptions surfacing through JPype
            raise _fail(what, exc) from exc

    def _require(self) -> Any:
        if self._db is None:
            raise ConnectorError(NAME, "not connected: call connect() first")
        return self._db

    async def open(self) -> None:
        """Open `<path>/database`, creating it on first use."""
        if self._db is not None:
            return

        def open_db() -> None:
            start_jvm(self._path, self._heap)
            arcadedb: Any = importlib.import_module("arcadedb_embedded")
            factory = arcadedb.DatabaseFactory(str(self._path / "database"))
            self._db = factory.open() if factory.exists() else factory.create()

        await self._run(f"cannot open the database under {self._path}", open_db)

    async def close(self) -> None:
        """Close the database (the JVM stays up for the rest of the process)."""
        db, self._db = self._db, None
        if db is not None:
            await self._run("close failed", db.close)

    async def ddl(self, commands: Sequence[str]) -> None:
        """Schema commands, one by one."""

        def run() -> None:
            db = self._require()
            with self._write_lock:
                for command in commands:
                    db.command("sql", command)

        await self._run("schema command failed", run)

    async def query(self, language: Language, command: str, params: Mapping[str, Any]) -> list[Row]:
        """One read, materialised in the worker thread."""

        def run() -> list[Row]:
            db = self._require()
            result = (
                db.query(language, command, dict(params)) if params else db.query(language, command)
            )
            rows: list[Row] = result.to_list()
            return rows

        return await self._run("query failed", run)

    async def write(self, statements: Sequence[Statement]) -> None:
        """All statements in one transaction, retried on a concurrent modification."""

        def body() -> None:
            db = self._require()
            for language, command, params in statements:
                db.command(language, command, dict(params))

        def run() -> None:
            db = self._require()
            with self._write_lock:
                db.run_in_transaction(body)

        if statements:
            await self._run("write failed", run)


# -- server -------------------------------------------------------------------------------
class HttpBackend(Backend):
    """An ArcadeDB server reached over its HTTP API with basic authentication.

    Reads go to `/api/v1/query/{db}` (which refuses anything that writes), writes to
    `/api/v1/command/{db}`; each request is one statement in its own transaction. The
    database is created on first use when the user may do so.

    Args:
        url: the server, e.g. `http://127.0.0.1:2480`.
        database, user, password: what to open and how to log in.
        timeout: seconds per request.
        transport: an httpx transport to use instead of the default (proxies, tests).
    """

    def __init__(
        self,
        url: str,
        database: str,
        user: str,
        password: str,
        *,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url.rstrip("/")
        self._database = database
        self._auth = httpx.BasicAuth(user, password)
        self._timeout = timeout
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._write_lock = asyncio.Lock()

    @property
    def is_open(self) -> bool:
        """Whether the client is open."""
        return self._client is not None

    async def _post(self, path: str, body: Mapping[str, Any], what: str) -> Any:
        client = self._client
        if client is None:
            raise ConnectorError(NAME, "not connected: call connect() first")
        try:
            response = await client.post(path, json=body)
        except _DROPPED as exc:  # the connection broke under the request: a new one may not
            raise TransientBackendError(NAME, f"{what} ({self._url}): {_name(exc)}") from exc
        except httpx.HTTPError as exc:
            raise _fail(f"{what} ({self._url})", exc) from exc
        return self._payload(response, what)

    def _payload(self, response: httpx.Response, what: str) -> Any:
        try:
            response.raise_for_status()
            payload: Any = response.json()
        except httpx.HTTPStatusError as exc:
            detail = _error_detail(response)
            message = f"{what}: HTTP {response.status_code}: {detail}"
            if response.status_code == 503:  # starting, or busy
                raise TransientBackendError(NAME, message) from exc
            raise ConnectorError(NAME, message) from exc
        except ValueError as exc:
            raise _fail(f"{what}: the server's answer is not JSON", exc) from exc
        body = _json_object(payload)
        if body is not None and body.get("truncated"):
            raise ConnectorError(NAME, f"{what}: the server truncated the result")
        return payload

    async def open(self) -> None:
        """Open the client; create the database if the server does not have it."""
        if self._client is not None:
            return
        self._client = httpx.AsyncClient(
            base_url=self._url, auth=self._auth, timeout=self._timeout, transport=self._transport
        )
        try:
            try:
                response = await self._client.get(f"/api/v1/exists/{self._database}")
            except httpx.HTTPError as exc:
                raise _fail(f"cannot reach the server at {self._url}", exc) from exc
            exists = self._payload(response, "checking the database").get("result")
            if not exists:
                await self._post(
                    "/api/v1/server",
                    {"command": f"create database {self._database}"},
                    f"creating the database {self._database!r}",
                )
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the HTTP client."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def ddl(self, commands: Sequence[str]) -> None:
        """Schema commands, one request each."""
        async with self._write_lock:
            for command in commands:
                await self._command("sql", command, {}, "schema command failed")

    async def _command(
        self, language: Language, command: str, params: Mapping[str, Any], what: str
    ) -> None:
        body = {"language": language, "command": command, "params": dict(params)}
        await self._post(f"/api/v1/command/{self._database}", body, what)

    async def query(self, language: Language, command: str, params: Mapping[str, Any]) -> list[Row]:
        """One read request; `limit: -1` lifts the server's default cap of 20,000 rows."""
        body = {"language": language, "command": command, "params": dict(params), "limit": -1}
        payload = await self._post(f"/api/v1/query/{self._database}", body, "query failed")
        rows: list[Row] = payload.get("result", [])
        return rows

    async def write(self, statements: Sequence[Statement]) -> None:
        """One request per statement, in order, one writer at a time."""
        async with self._write_lock:
            for language, command, params in statements:
                await self._command(language, command, params, "write failed")


def _error_detail(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        return response.text[:300]
    fields = _json_object(body)
    if fields is None:
        return str(body)[:300]
    exception = str(fields.get("exception") or fields.get("error") or "error")
    detail = str(fields.get("detail") or "")
    return f"{exception}: {detail}"[:500]


def _json_object(value: object) -> dict[str, Any] | None:
    """`value` if it is a JSON object (httpx's `Response.json()` is typed `Any`), else None."""
    if isinstance(value, dict):
        return cast("dict[str, Any]", value)  # a JSON object's keys are strings
    return None
