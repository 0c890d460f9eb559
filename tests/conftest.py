"""Shared fixtures: one embedding model per session, fresh embedded stores per test."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# The ONNX export and the embedding cache of the tests' own, beside the checkout: a user's
# cache neither serves nor receives the tests' vectors (servers the tests start inherit it).
os.environ.setdefault("UDA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".cache"))

import uda
from uda.embedding import Embedder
from uda.embedding.factory import shared_embedder

# Tests assert behaviour, benchmarks measure time: a property test must not fail because a
# loaded machine ran one example past hypothesis's default 200 ms deadline.
settings.register_profile("uda", deadline=None)
settings.load_profile("uda")

# Fast tests of pure code and of the planner over test doubles: no embedding model, no store
# on disk, no server. `make test-unit` runs them alone in seconds; `make test` runs everything.
UNIT_MODULES = frozenset(
    {
        "test_agent_router",
        "test_bench_metrics",
        "test_bench_parts",
        "test_bench_report",
        "test_clearance",
        "test_compose",
        "test_exact",
        "test_filter_grammar",
        "test_fusion",
        "test_layout",
        "test_lexical_analyzer",
        "test_pagerank_seeds",
        "test_planner_unit",
        "test_planner_texts",
        "test_current_heads",
        "test_registry",
        "test_result_fields",
    }
)


_HEAVY_FIXTURES = frozenset({"embedder", "client", "server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem not in UNIT_MODULES:
            continue
        heavy = _HEAVY_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if heavy:
            message = f"{item.nodeid} is a unit test but uses {sorted(heavy)}"
            print(f"ERROR: {message}", file=sys.stderr)
            raise pytest.UsageError(message)
        item.add_marker(pytest.mark.unit)


_session: pytest.Session | None = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    global _session
    _session = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave with the session's exit status before native libraries' finalizers run.

    Once every test has run and been reported, servers stopped and temporary folders gone,
    the interpreter's own shutdown occasionally crashed with SIGSEGV inside a native
    extension (torch, Chroma's bindings and psycopg's pool each keep threads), turning a
    green run red (seen once in four fresh-clone runs: "807 passed", then a segmentation
    fault). The status is the session's, so a failing or empty run still fails; set
    UDA_TEST_FULL_SHUTDOWN=1 to exit the ordinary way when hunting that crash.
    """
    del config
    if _session is None or os.environ.get("UDA_TEST_FULL_SHUTDOWN"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(_session.exitstatus))


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The packaged MiniLM, loaded once for the whole session."""
    model = shared_embedder()
    model.embed_query("warm up")
    return model


@pytest.fixture
def client(tmp_path: Path, embedder: Embedder) -> Iterator[uda.Client]:
    """A sync client on the embedded profile (Chroma, networkx, SQLite) in a fresh folder."""
    c = uda.connect(path=tmp_path / "uda", embedder=embedder)
    yield c
    c.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small git-less repository: a public README, a decision record and a runbook."""
    root = tmp_path / "payments"
    (root / "docs" / "adr").mkdir(parents=True)
    (root / "README.md").write_text(
        "---\nsensitivity: public\n---\n# Payments\n\nPayments are retried three times "
        "with exponential backoff. See ADR-0001.\n"
    )
    (root / "docs" / "adr" / "0001-idempotency-keys.md").write_text(
        "# 1. Use idempotency keys\n\nDate: 2025-03-01\n\n## Status\n\nAccepted\n\n"
        "## Decision\n\nEvery payment attempt carries an idempotency key.\n"
    )
    (root / "docs" / "runbook.md").write_text(
        "# Runbook\n\nWhen the payment provider times out, page the on-call engineer.\n"
    )
    return root


@pytest.fixture(scope="module")
def server_profile_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A server profile file on real PostgreSQL and ArcadeDB (a schema and database of its own).

    For tests that start `uda serve` processes on it (tests/serve_fixtures.py).
    """
    pytest.importorskip("psycopg")
    pytest.importorskip("arcadedb_embedded")
    from arcadedb_fixtures import running_arcadedb, server_profile
    from postgres_fixtures import running_postgres

    from benchmarks.serving import profile_toml

    root = tmp_path_factory.mktemp("served")
    with running_postgres(root / "pg") as (_, dsn), running_arcadedb(root / "arc") as (arc, _):
        info = arc.status()
        assert info is not None
        unique = uuid.uuid4().hex[:10]
        profile = server_profile(
            root, dsn, info, schema=f"s_{unique}", database=f"d_{unique}", exact=True
        )
        file = root / "server.toml"
        file.write_text(profile_toml(profile))
        yield file
