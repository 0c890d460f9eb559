"""What travels over HTTP, shared by the server and the Python client (no web framework here).

Search results travel as an Arrow IPC stream in `ontology.result_schema()`. The explanation
and the clearance the server applied ride along in the stream's schema metadata, so that one
response carries everything `SearchResponse` offers and the batches stay in the documented
schema; the client removes these keys again, giving back the pinned schema exactly.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

ARROW_STREAM = "application/vnd.apache.arrow.stream"
PROBLEM_JSON = "application/problem+json"
API_VERSION = "v1"

# Headers; the names are matched case-insensitively by every HTTP stack.
API_KEY_HEADER = "X-API-Key"
REQUEST_ID_HEADER = "X-Request-ID"
CLEARANCE_HEADER = "X-UDA-Clearance"
NARROWED_HEADER = "X-UDA-Clearance-Narrowed"
# On a degraded answer: `backend:leg` for each backend left out, comma-separated.
DEGRADED_HEADER = "X-UDA-Degraded"


def degraded_header(degraded: Iterable[Any]) -> str:
    """The `X-UDA-Degraded` value of a degraded answer's `degraded` list."""
    return ", ".join(f"{d.backend}:{d.leg}" for d in degraded)


# Schema metadata keys the server adds to a result stream (JSON-encoded values).
META_EXPLAIN = b"uda.http.explain"
META_CLEARANCE = b"uda.http.clearance"
META_QUERY_ID = b"uda.http.query_id"
META_NEXT_CURSOR = b"uda.http.next_cursor"
_HTTP_KEYS = (META_EXPLAIN, META_CLEARANCE, META_QUERY_ID, META_NEXT_CURSOR)


def stream_chunks(
    reader: pa.RecordBatchReader, extra: Mapping[bytes, Mapping[str, Any] | str | None]
) -> Iterator[bytes]:
    """An Arrow IPC stream, one chunk per message, with `extra` added to the schema metadata.

    Yielding per batch lets the server send the first results before the last are encoded.
    """
    metadata: dict[bytes, bytes] = dict(reader.schema.metadata or {})
    for key, value in extra.items():
        metadata[key] = json.dumps(value, separators=(",", ":"), default=str).encode()
    schema = reader.schema.with_metadata(metadata)  # pyright: ignore[reportUnknownMemberType]
    buffer = io.BytesIO()
    writer = pa.ipc.new_stream(buffer, schema)

    def drain() -> bytes:
        data = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return data

    yield drain()  # the schema message
    for batch in reader:
        writer.write_batch(batch.replace_schema_metadata(metadata))  # pyright: ignore[reportUnknownMemberType]
        yield drain()
    writer.close()
    yield drain()  # the end-of-stream marker


def read_stream(data: bytes) -> tuple[pa.Table, dict[str, Any]]:
    """Decode a result stream: the table in the pinned schema, and what the server added.

    Returns:
        The table (its schema metadata as `ontology.result_schema()` has it) and a dict with
        the keys `explain`, `clearance`, `query_id` and `next_cursor` that were present.
    """
    table = pa.ipc.open_stream(data).read_all()
    metadata = dict(table.schema.metadata or {})
    extra: dict[str, Any] = {}
    for key in _HTTP_KEYS:
        raw = metadata.pop(key, None)
        if raw is not None:
            extra[key.decode().rsplit(".", 1)[-1]] = json.loads(raw)
    return table.replace_schema_metadata(metadata), extra


def negotiate(accept: str | None) -> str | None:
    """The response format an Accept header asks for: `json`, `arrow`, or None (neither).

    JSON is the default (no header, `*/*`, `application/*`); Arrow when its media type is
    acceptable and preferred at least as much as JSON.
    """
    if accept is None or not accept.strip():
        return "json"
    arrow_q = json_q = 0.0
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    quality = 0.0
        media = media.lower()
        if media == ARROW_STREAM:
            arrow_q = max(arrow_q, quality)
        elif media in {"application/json", "application/*", "*/*"}:
            json_q = max(json_q, quality)
    if arrow_q > 0 and arrow_q >= json_q:
        return "arrow"
    return "json" if json_q > 0 else None
