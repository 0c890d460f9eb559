"""Embedders by name, one per model and runtime in a process.

A profile names its runtime (`[uda] embedder`); every client of the process that names the same
one shares one instance: a model loads once, however many clients.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from uda.embedding.base import Embedder
from uda.errors import ConfigError

EmbedderName = Literal["onnx", "onnx-int8", "sentence-transformers", "openai-compatible"]
EMBEDDERS: tuple[EmbedderName, ...] = (
    "onnx",
    "onnx-int8",
    "sentence-transformers",
    "openai-compatible",
)
DEFAULT_EMBEDDER: EmbedderName = "onnx"

_SHARED: dict[tuple[Any, ...], Embedder] = {}
_SHARED_LOCK = threading.Lock()


def make_embedder(
    kind: EmbedderName = DEFAULT_EMBEDDER,
    model_path: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Embedder:
    """A new embedder of runtime `kind` (no cache)."""
    if kind == "openai-compatible":
        from uda.embedding.http import OpenAICompatibleEmbedder

        if model_path is not None:
            raise ConfigError(
                "[uda] model_path: the openai-compatible embedder runs no local model; name "
                "the server's model in [embedder] model",
                field="model_path",
                value=model_path,
            )
        return OpenAICompatibleEmbedder.from_options(options or {})
    if options:
        raise _no_options(kind, options)
    if kind in ("onnx", "onnx-int8"):
        from uda.embedding.onnx import OnnxEmbedder

        return OnnxEmbedder(model_path, int8=kind == "onnx-int8")
    from uda.embedding.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(model_path)


def embedder_options(kind: EmbedderName, table: Mapping[str, Any]) -> dict[str, Any]:
    """A profile's `[embedder]` table, checked for runtime `kind`.

    Raises:
        ConfigError: naming `embedder.<key>` (see `uda.embedding.http.embedder_options`);
            the local runtimes take no options yet.
    """
    if kind == "openai-compatible":
        from uda.embedding.http import embedder_options as http_options

        return http_options(table)
    if table:
        raise _no_options(kind, table)
    return {}


def _no_options(kind: str, table: Mapping[str, Any]) -> ConfigError:
    key = next(iter(table))
    return ConfigError(
        f"[embedder] {key}: the {kind} embedder takes no options ([embedder] is for "
        '`embedder = "openai-compatible"`)',
        field=f"embedder.{key}",
        value=table[key],
    )


def shared_embedder(
    model_path: str | None = None,
    kind: EmbedderName = DEFAULT_EMBEDDER,
    *,
    options: Mapping[str, Any] | None = None,
    cache: Path | None = None,
    cluster: str | None = None,
) -> Embedder:
    """The process's embedder of `kind` for `model_path`.

    Args:
        model_path: a local model folder (default: the packaged all-MiniLM-L6-v2).
        kind: the runtime.
        options: the runtime's settings (a profile's `[embedder]` table).
        cache: a folder for the persistent embedding cache (`uda.embedding.cache`), or None
            for none.
        cluster: a Dask scheduler whose workers embed documents (`uda.embedding.cluster`);
            the cache sits in front of it, so only texts never embedded travel.
    """
    key = (model_path, kind, tuple(sorted((options or {}).items())), cache, cluster)
    with _SHARED_LOCK:
        embedder = _SHARED.get(key)
        if embedder is None:
            embedder = make_embedder(kind, model_path, options)
            if cluster is not None:
                from uda.embedding.cluster import ClusterEmbedder

                # The workers build the same embedder by this recipe (pickled by reference).
                recipe = functools.partial(make_embedder, kind, model_path, dict(options or {}))
                embedder = ClusterEmbedder(embedder, cluster, make=recipe)
            if cache is not None:
                from uda.embedding.cache import CachedEmbedder

                embedder = CachedEmbedder(embedder, cache)
            _SHARED[key] = embedder
        return embedder
