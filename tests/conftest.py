"""Shared fixtures: one embedding model per session, fresh embedded stores per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import uda
from uda.client import shared_embedder
from uda.embedder import SentenceTransformerEmbedder


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The packaged MiniLM, loaded once for the whole session."""
    model = shared_embedder()
    model.embed_query("warm up")
    return model


@pytest.fixture
def client(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> Iterator[uda.Client]:
    """A sync client on the embedded profile (Chroma, networkx, SQLite) in a fresh folder."""
    c = uda.connect(path=tmp_path / "uda", embedder=embedder)
    yield c
    c.close()
