"""The sentence-transformers model run by ONNX Runtime: the same vectors, a fraction of the time.

The packaged weights (a sentence-transformers folder: a BERT model, mean pooling, L2
normalisation) are exported to ONNX once, with torch, into a cache folder keyed by the
weights' fingerprint (`export_key`), and loaded from there ever after: a changed model
gets a new export, an unchanged one is never exported twice. The transformer runs in ONNX
Runtime; tokenisation is the model's own (`tokenizer.json`, the same fast tokenizer
sentence-transformers uses, truncated at the model's `max_seq_length`); pooling and
normalisation are done here exactly as sentence-transformers does them (the mean of the
token vectors under the attention mask, then unit length), so the vectors match torch's
(tests/test_onnx_embedder.py: cosine >= 0.9999) and stores embedded either way stay valid.

The export writes to a temporary file renamed into place, under a lock file: two processes
starting together export once, and a killed export leaves nothing behind.

`onnx-int8` (opt-in) runs the same export with its MatMul weights dynamically quantised to
int8 (ONNX Runtime's `quantize_dynamic`, per channel), made once from the fp32 export beside
it. Its vectors are not the fp32 model's (a cosine of about 0.9 to them), so it is another
model with a fingerprint of its own: a store embedded with one refuses the other. The ingest
suite reports its speed and its SciFact nDCG@10 against fp32 (docs/adr/0027-onnx-embedder.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from uda.embedding.base import (
    QueryCache,
    Vector,
    cache_root,
    embed_spinning,
    embed_threads,
    empty_vectors,
    packaged_model_path,
    weights_fingerprint,
)

ONNX_OPSET = 17
_EXPORT_VERSION = "1"  # bumped when the export itself changes (inputs, opset, outputs)


def export_key(model_path: str | Path) -> str:
    """The cache folder's name for an export: the weights' fingerprint and the export's version."""
    weights = weights_fingerprint(model_path)
    return hashlib.sha256(f"{_EXPORT_VERSION}:{weights}".encode()).hexdigest()[:16]


def exported_model(model_path: str | Path, cache: Path | None = None) -> Path:
    """The ONNX file of the model at `model_path`, exported first if the cache lacks it."""
    folder = (cache or cache_root()) / "onnx" / export_key(model_path)
    target = folder / "model.onnx"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / ".lock"):
        if not target.is_file():  # another process may have exported it meanwhile
            _export(Path(model_path), target)
    return target


def quantized_model(model_path: str | Path, cache: Path | None = None) -> Path:
    """The int8 ONNX file of the model at `model_path`, quantised first if the cache lacks it."""
    source = exported_model(model_path, cache)
    target = source.parent / "model-int8.onnx"
    if target.is_file():
        return target
    with _locked(source.parent / ".lock"):
        if not target.is_file():
            _quantize(source, target)
    return target


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation of the MatMul weights, per channel, atomically."""
    quantization: Any = importlib.import_module("onnxruntime.quantization")
    handle, partial = tempfile.mkstemp(prefix=".model-", suffix=".onnx", dir=target.parent)
    os.close(handle)
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_advice)
    try:
        quantization.quantize_dynamic(
            str(source),
            partial,
            weight_type=quantization.QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
        os.replace(partial, target)
    finally:
        root.removeFilter(_no_preprocessing_advice)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


def _no_preprocessing_advice(record: logging.LogRecord) -> bool:
    """Drop the quantiser's advice to pre-process the model.

    The advice is for static quantisation of image models: noise to a user here.
    """
    return not record.getMessage().startswith("Please consider to run pre-processing")


@contextlib.contextmanager
def _locked(path: Path) -> Generator[None]:
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _export(model_path: Path, target: Path) -> None:
    """Export the transformer (token ids in, token vectors out) with torch, atomically."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")
    transformers.logging.disable_progress_bar()  # a bar per export is noise in CLI output

    # Eager attention traces into plain operators; the fused kernel's checks would be baked
    # into the graph as constants.
    bert: Any = transformers.AutoModel.from_pretrained(str(model_path), attn_implementation="eager")
    bert.eval()

    class TokenVectors(torch.nn.Module):  # keyword arguments: forward's order has changed
        def __init__(self) -> None:
            super().__init__()  # pyright: ignore[reportUnknownMemberType]
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    model = TokenVectors()
    ids = torch.ones((2, 8), dtype=torch.long)
    inputs = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dynamic = {name: {0: "batch", 1: "tokens"} for name in names}
    dynamic["last_hidden_state"] = {0: "batch", 1: "tokens"}
    handle, partial = tempfile.mkstemp(prefix=".model-", suffix=".onnx", dir=target.parent)
    os.close(handle)
    try:
        # The TorchScript exporter: the newer one needs onnxscript, which is not installed.
        with torch.no_grad(), warnings.catch_warnings():
            # Tracer notes on shapes that are constant for this model: noise to a user.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                inputs,
                partial,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=dynamic,
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        os.replace(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


class OnnxEmbedder:
    """A sentence-transformers model folder, run by ONNX Runtime on the CPU.

    Args:
        model_path: a local sentence-transformers folder; defaults to the packaged
            all-MiniLM-L6-v2.
        batch_size: documents per forward pass on ingest.
        cache_size: how many query embeddings to keep.
        threads: ONNX Runtime's intra-op threads (default: `embed_threads()`).
        cache: where exports are kept (default `cache_root()`).
        int8: run the int8-quantised export (`quantized_model`): faster, other vectors.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        batch_size: int = 32,
        cache_size: int = 4096,
        threads: int | None = None,
        cache: Path | None = None,
        int8: bool = False,
    ) -> None:
        self._model_path = model_path
        self._int8 = int8
        self._batch_size = batch_size
        self._threads = threads or embed_threads()
        self._spinning = embed_spinning()
        self._export_cache = cache
        self._queries = QueryCache(cache_size)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._dimension: int | None = None

    @property
    def model_path(self) -> str:
        """The folder the weights are read from."""
        return self._model_path or packaged_model_path()

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint.

        For fp32 it is the weights' fingerprint, the same as sentence-transformers' for the
        same folder; the int8 variant's is its own (its vectors differ).
        """
        weights = weights_fingerprint(self.model_path)
        if not self._int8:
            return weights
        return hashlib.sha256(f"int8-dynamic-per-channel:{weights}".encode()).hexdigest()[:16]

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                ort: Any = importlib.import_module("onnxruntime")
                tokenizers: Any = importlib.import_module("tokenizers")

                folder = Path(self.model_path)
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                # Spinning idle threads answer one query sooner on an idle machine (p50 2.7
                # against 3.6 ms here) but burn CPU that concurrent requests need (under a
                # loaded machine 10.6 against 6.8 ms of CPU a query): `uda serve` turns it off.
                spin = "1" if self._spinning else "0"
                options.add_session_config_entry("session.intra_op.allow_spinning", spin)
                options.add_session_config_entry("session.inter_op.allow_spinning", spin)
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                make = quantized_model if self._int8 else exported_model
                onnx_file = make(folder, self._export_cache)
                session = ort.InferenceSession(
                    str(onnx_file), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
                tokenizer.enable_truncation(max_length=_max_length(folder))
                tokenizer.enable_padding(pad_id=_pad_id(tokenizer), pad_token=_PAD)
                self._dimension = int(session.get_outputs()[0].shape[-1])
                self._tokenizer, self._session = tokenizer, session
            return self._session, self._tokenizer

    @property
    def dimension(self) -> int:
        """Length of every vector (384 for MiniLM)."""
        self._load()
        assert self._dimension is not None  # noqa: S101 - set by _load
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Embed in batches; rows are unit length."""
        if not texts:
            return empty_vectors()
        session, tokenizer = self._load()
        # Similar lengths together: a batch is padded to its longest text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            out[rows] = _embed(session, tokenizer, [texts[i] for i in rows])
        return out

    def embed_query(self, text: str) -> Vector:
        """Embed one query, from the cache when seen before."""
        return self._queries.get(text, lambda one: self.embed_documents([one])[0])


def _embed(session: Any, tokenizer: Any, texts: list[str]) -> Vector:
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    types = np.array([e.type_ids for e in encodings], dtype=np.int64)
    (tokens,) = session.run(
        ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    )
    # Mean pooling over the real tokens, then unit length: sentence-transformers' Pooling
    # (mean tokens) and Normalize modules, in float32 as they compute it.
    weights = mask[:, :, None].astype(np.float32)
    summed = (tokens * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return (pooled / norms).astype(np.float32)


def _max_length(folder: Path) -> int:
    """The model's `max_seq_length` (sentence-transformers cuts there; 512 without one)."""
    config = folder / "sentence_bert_config.json"
    if config.is_file():
        return int(json.loads(config.read_text()).get("max_seq_length", 512))
    return 512


_PAD = "[PAD]"  # BERT's padding token


def _pad_id(tokenizer: Any) -> int:
    pad = tokenizer.token_to_id(_PAD)
    return 0 if pad is None else int(pad)


__all__ = ["OnnxEmbedder", "cache_root", "export_key", "exported_model"]
