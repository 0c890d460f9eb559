"""Shared pieces of the HTTP tests: a small corpus at every clearance, keys, a served app.

The corpus has one element at each sensitivity level and in two projects, all about payment
retries, so that one question reaches all of them and clearance decides what comes back.
`service` is a function-scoped fixture (that corpus served in process, for test_http.py and
test_http_problems.py): a test module imports it and lists it in its `__all__`; `key` gives a
principal's API key header for it.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

import uda
from ontology import Decision, Document, Element, Person, Relation, Repository
from uda.embedding import Embedder
from uda.http import Authenticator, create_app, hash_api_key
from uda.http.auth import ApiKey
from uda.query.clearance import Clearance

QUESTION = "how are failed payment calls retried?"

PUBLIC_IDS = {"doc:retries", "repo:payments", "person:ada"}
INTERNAL_CORE = ["internal", "project:core"]


def corpus() -> tuple[list[Element], list[Relation]]:
    """Elements at every level and in two projects, with a restricted governing decision."""
    elements: list[Element] = [
        Repository(element_id="repo:payments", name="payments", sensitivity="public"),
        Person(element_id="person:ada", name="Ada Lovelace", sensitivity="public"),
        Decision(
            element_id="adr:retry",
            name="Retry payments with idempotency keys",
            text="We retry failed payment calls with an idempotency key per attempt.",
            status="accepted",
            sensitivity="restricted",
        ),
        Document(
            element_id="doc:retries",
            name="Retry policy",
            text="Failed payment calls are retried three times with exponential backoff.",
            sensitivity="public",
        ),
        Document(
            element_id="doc:ledger",
            name="Ledger of attempts",
            text="The ledger records every payment call attempt and every retry.",
            sensitivity="internal",
        ),
        Document(
            element_id="doc:core-plan",
            name="Core retry roadmap",
            text="Core project plan: payment retries move to a queue with backoff.",
            sensitivity="internal",
            scope="project:core",
        ),
        Document(
            element_id="doc:costs",
            name="Retry costs",
            text="Confidential: what failed payment retries cost us per month.",
            sensitivity="confidential",
        ),
        Document(
            element_id="doc:incident",
            name="Retry incident",
            text="Restricted incident: failed payment calls were retried without limits.",
            sensitivity="restricted",
        ),
        Document(
            element_id="doc:other",
            name="Other project retries",
            text="Other project: failed payment calls are retried by the client.",
            sensitivity="public",
            scope="project:other",
        ),
    ]
    relations = [
        Relation(source_id="doc:retries", relation="partOf", target_id="repo:payments"),
        Relation(source_id="doc:retries", relation="governedBy", target_id="adr:retry"),
        Relation(source_id="doc:retries", relation="authoredBy", target_id="person:ada"),
        Relation(source_id="doc:ledger", relation="partOf", target_id="repo:payments"),
        Relation(source_id="doc:incident", relation="partOf", target_id="repo:payments"),
        Relation(source_id="doc:costs", relation="governedBy", target_id="adr:retry"),
    ]
    return elements, relations


@dataclass(frozen=True, kw_only=True)
class Keys:
    """Raw API keys of four principals, and a token secret."""

    public: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    internal: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    writer: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    admin: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    secret: str = field(default_factory=lambda: secrets.token_hex(32))

    def entries(self) -> list[ApiKey]:
        """The keys file's entries for these keys."""

        def entry(name: str, key: str, grant: list[str], *, write: bool = False) -> ApiKey:
            return ApiKey(
                name=name,
                sha256=hash_api_key(key),
                clearance=Clearance.parse(grant),
                can_write=write,
            )

        return [
            entry("public-reader", self.public, ["public"]),
            entry("internal-reader", self.internal, INTERNAL_CORE),
            entry("internal-writer", self.writer, INTERNAL_CORE, write=True),
            entry("admin", self.admin, ["restricted", "project:*"], write=True),
        ]

    def toml(self) -> str:
        """The same entries as a keys file."""
        out: list[str] = []
        for key in self.entries():
            clearance = ", ".join(f'"{e}"' for e in key.clearance.entries())
            out.append(
                f'[[keys]]\nname = "{key.name}"\nsha256 = "{key.sha256}"\n'
                f"clearance = [{clearance}]\ncan_write = {str(key.can_write).lower()}\n"
            )
        return "\n".join(out)

    def authenticator(self, *, anonymous: bool = False) -> Authenticator:
        """Keys and tokens (signed with `secret`) both accepted."""
        return Authenticator(
            api_keys=self.entries(), token_secret=self.secret, allow_anonymous=anonymous
        )


@dataclass(frozen=True, kw_only=True)
class Service:
    """An app over an open client, and an httpx client talking to it in process."""

    app: FastAPI
    client: uda.AsyncClient
    http: httpx.AsyncClient
    keys: Keys


@asynccontextmanager
async def serve(
    path: Path,
    embedder: Embedder,
    *,
    keys: Keys | None = None,
    anonymous: bool = False,
    elements: list[Element] | None = None,
    relations: list[Relation] | None = None,
    **options: int,
) -> AsyncIterator[Service]:
    """The corpus (or the given elements) ingested into a fresh store, served in process."""
    keys = keys or Keys()
    if elements is None:
        elements, relations = corpus()
    async with uda.aconnect(path=path, embedder=embedder) as client:
        await client.ingest(elements, relations or [])
        app = create_app(client, keys.authenticator(anonymous=anonymous), **options)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://uda.test") as http:
            yield Service(app=app, client=client, http=http, keys=keys)


@pytest.fixture
async def service(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Service]:
    async with serve(tmp_path / "uda", embedder) as running:
        yield running


def key(service: Service, who: str = "internal") -> dict[str, str]:
    return {"X-API-Key": getattr(service.keys, who)}
