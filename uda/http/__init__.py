"""UDA over HTTP: the service (`create_app`, `uda serve`) and its Python client.

    from uda.http import create_app, Authenticator, load_api_keys
    app = create_app(client, Authenticator(api_keys=load_api_keys("keys.toml")))

    client = uda.connect("http://127.0.0.1:8000", api_key="...")   # a RemoteClient

Names load lazily: the client needs only httpx, the service needs the `http` extra
(FastAPI, uvicorn, PyJWT).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uda.http.app import create_app
    from uda.http.auth import (
        Authenticator,
        Principal,
        hash_api_key,
        issue_token,
        key_entry_toml,
        load_api_keys,
        new_api_key,
    )
    from uda.http.remote import AsyncRemoteClient, RemoteClient, RemoteSearchResponse

_LAZY = {
    "create_app": "uda.http.app",
    "Authenticator": "uda.http.auth",
    "Principal": "uda.http.auth",
    "hash_api_key": "uda.http.auth",
    "issue_token": "uda.http.auth",
    "key_entry_toml": "uda.http.auth",
    "load_api_keys": "uda.http.auth",
    "new_api_key": "uda.http.auth",
    "AsyncRemoteClient": "uda.http.remote",
    "RemoteClient": "uda.http.remote",
    "RemoteSearchResponse": "uda.http.remote",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'uda.http' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncRemoteClient",
    "Authenticator",
    "Principal",
    "RemoteClient",
    "RemoteSearchResponse",
    "create_app",
    "hash_api_key",
    "issue_token",
    "key_entry_toml",
    "load_api_keys",
    "new_api_key",
]
