"""`uda serve` leaves its start-up heap out of the garbage collector's later passes (ADR 58).

The service's process is its own: once the model, the stores and the routes are loaded they
live as long as it does, and walking them on every full collection stopped the event loop
for 0.16 to 0.24 s every few seconds under load. An app embedded in someone else's process
(`create_app` without the flag) leaves that process's collector alone.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import uda
from uda.http.app import create_app
from uda.http.auth import Authenticator
from uda.http.serve import ServeSettings


def _settings(store: Path) -> ServeSettings:
    return ServeSettings(
        profile=None,
        path=str(store),
        keys=None,
        token_secret_env=None,
        token_audience=None,
        insecure_public=True,
        max_body_bytes=1 << 20,
    )


@pytest.mark.unit
def test_serve_freezes_the_heap_it_started_with_and_thaws_it_on_shutdown(
    tmp_path: Path,
) -> None:
    gc.unfreeze()
    app = _settings(tmp_path / "store").app()
    with TestClient(app) as http:
        frozen = gc.get_freeze_count()
        assert http.get("/healthz").status_code == 200
        garbage = [[]]
        garbage[0].append(garbage)  # a cycle made after start-up is still collected
        del garbage
        assert gc.collect() > 0
    assert frozen > 10_000  # the model, the stores, the app: far more than a handful
    assert gc.get_freeze_count() == 0


@pytest.mark.unit
def test_an_app_in_someone_elses_process_leaves_its_collector_alone(tmp_path: Path) -> None:
    gc.unfreeze()
    app = create_app(
        uda.aconnect(path=tmp_path / "store"), Authenticator(allow_anonymous=True), owns_client=True
    )
    with TestClient(app) as http:
        assert http.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == 0
