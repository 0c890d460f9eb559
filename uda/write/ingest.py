"""Ingest a whole source: load a folder, write it in batches, tombstone what vanished.

    async with uda.aconnect(path=".uda") as client:
        report = await ingest_source(client, "path/to/repo")  # or client.ingest_source(...)
    print(report.written, report.deleted)

    with uda.connect(path=".uda") as client:  # the same, blocking
        report = client.ingest_source("path/to/repo", batch_size=16)

The one implementation behind `uda ingest`, `AsyncClient.ingest_source` and
`Client.ingest_source`: any surface that can reach a client (HTTP, agents) gets the same
batching and the same tombstoning. Loading is `uda.loaders.load_repository`; each batch goes
through the client's `ingest`, so the write path's guarantees (validation, skipping unchanged
content, the outbox) hold per batch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from uda.errors import UserError
from uda.loaders import MAX_FILE_BYTES, LoadedSource, SkippedFile, load_repository
from uda.write.validation import ElementInput, RelationInput
from uda.write.writer import IngestReport

DEFAULT_BATCH_SIZE = 64

Progress = Callable[[int, int], None]
"""Called with (elements handed to the write path so far, elements loaded): once with 0
before the first batch, then after every batch."""


class SourceOptions(TypedDict, total=False):
    """`ingest_source`'s options as keyword arguments, for the clients that forward them."""

    include_code: bool
    policy: str | os.PathLike[str] | None
    max_file_bytes: int
    batch_size: int
    tombstone_vanished: bool
    progress: Progress | None


class IngestTarget(Protocol):
    """What `ingest_source` needs of a client: `AsyncClient` has it."""

    async def ingest(
        self, elements: Iterable[ElementInput] = (), relations: Iterable[RelationInput] = ()
    ) -> IngestReport:
        """Write elements and relations; unchanged content is skipped."""
        ...

    async def delete(self, element_ids: Iterable[str]) -> IngestReport:
        """Tombstone elements in every store."""
        ...

    async def element_ids(self, prefix: str = "") -> list[str]:
        """Ids of the live elements that start with `prefix`."""
        ...


@dataclass(frozen=True, kw_only=True)
class SourceIngestReport:
    """What ingesting one source did, summed over its batches.

    Attributes:
        repository: The name of the source's `Repository` element.
        id_prefix: The prefix of the source's ids; vanished files were looked for under it.
        loaded: Elements the loader produced (the repository, documents, decisions, persons).
        written: Elements with a new state.
        unchanged: Elements skipped because their content had not changed.
        deleted: Elements tombstoned because their files vanished (0 with
            `tombstone_vanished=False`).
        chunks: Chunks of the written elements.
        embedded: Of those chunks, the ones embedded now; the rest reused a stored embedding.
        edges: New edges.
        edges_unchanged: Edges that were already stored.
        skipped: The files and folders the loader left out, each with a stable reason code
            and a detail, sorted by path.
        hlc: The newest stamp this ingest wrote, or None if it wrote nothing.
    """

    repository: str
    id_prefix: str
    loaded: int
    written: int
    unchanged: int
    deleted: int
    chunks: int
    embedded: int
    edges: int
    edges_unchanged: int
    skipped: tuple[SkippedFile, ...]
    hlc: int | None

    @property
    def reused(self) -> int:
        """Chunks whose embedding was reused rather than computed."""
        return self.chunks - self.embedded

    def skipped_by_reason(self) -> dict[str, int]:
        """How many files and folders were skipped for each reason code, sorted by code."""
        counts = Counter(entry.reason.value for entry in self.skipped)
        return dict(sorted(counts.items()))

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values, as `uda ingest --format json` prints it.

        Every field, `reused`, `skipped` as `{path, reason, detail}` objects and
        `skipped_by_reason`.
        """
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return {
            **fields,
            "reused": self.reused,
            "skipped": [entry.to_dict() for entry in self.skipped],
            "skipped_by_reason": self.skipped_by_reason(),
        }


async def ingest_source(
    client: IngestTarget,
    path: str | os.PathLike[str],
    *,
    include_code: bool = False,
    policy: str | os.PathLike[str] | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
    batch_size: int = DEFAULT_BATCH_SIZE,
    tombstone_vanished: bool = True,
    progress: Progress | None = None,
) -> SourceIngestReport:
    """Load a folder or git repository and write what changed, incrementally.

    Elements are written `batch_size` at a time, then every relation at once (their
    endpoints exist by then). Elements stored under the source's id prefix that the folder
    no longer yields are then tombstoned, in every store.

    Args:
        client: Where to write; an open `AsyncClient`.
        path: The folder to load (see `uda.loaders.load_repository`).
        include_code: Also load source code and configuration files as documents.
        policy: A policy file to use instead of `<path>/.uda-policy.toml`.
        max_file_bytes: Files larger than this are skipped as `too-big` (default 1 MiB).
        batch_size: Elements per `ingest` call: each batch commits on its own, so an
            interrupted ingest keeps the batches before it.
        tombstone_vanished: Tombstone elements whose files disappeared.
        progress: Called on the client's event loop (keep it quick); see `Progress`.

    Returns:
        The counts of what was loaded, written, reused and deleted.

    Raises:
        UserError: `path` is not a folder, `batch_size` or `max_file_bytes` is below 1, or an
            element or relation is invalid.
        InvalidElementError: A front matter or policy sensitivity or scope is invalid.
        ConfigError: The policy file is missing (when given), not TOML, or has unknown keys.
        ConnectorError: A store failed.
    """
    if batch_size < 1:
        raise UserError(
            f"batch_size {batch_size}: give at least 1 element per batch",
            field="batch_size",
            value=batch_size,
        )
    # Loading reads every file and runs git: off the event loop, so a server stays responsive.
    source = await asyncio.to_thread(
        load_repository,
        path,
        include_code=include_code,
        policy=policy,
        max_file_bytes=max_file_bytes,
    )
    return await _write(client, source, batch_size, tombstone_vanished, progress)


async def _write(
    client: IngestTarget,
    source: LoadedSource,
    batch_size: int,
    tombstone_vanished: bool,
    progress: Progress | None,
) -> SourceIngestReport:
    total = len(source.elements)
    writes: list[IngestReport] = []
    if progress is not None:
        progress(0, total)
    for start in range(0, total, batch_size):
        batch = source.elements[start : start + batch_size]
        writes.append(await client.ingest(batch))
        if progress is not None:
            progress(start + len(batch), total)
    # After every element: a relation's endpoints must exist, in the batch or the store.
    writes.append(await client.ingest(relations=source.relations))
    stamps = [w.hlc for w in writes if w.hlc is not None]
    deleted = 0
    if tombstone_vanished:
        present = {e.element_id for e in source.elements}
        gone = [i for i in await client.element_ids(prefix=source.id_prefix) if i not in present]
        if gone:
            # Only its count and stamp: the edges a delete closes are not new edges.
            tombstoned = await client.delete(gone)
            deleted = tombstoned.deleted
            if tombstoned.hlc is not None:
                stamps.append(tombstoned.hlc)
    return SourceIngestReport(
        repository=source.repository.name,
        id_prefix=source.id_prefix,
        loaded=total,
        written=sum(w.written for w in writes),
        unchanged=sum(w.unchanged for w in writes),
        deleted=deleted,
        chunks=sum(w.chunks for w in writes),
        embedded=sum(w.embedded for w in writes),
        edges=sum(w.edges for w in writes),
        edges_unchanged=sum(w.edges_unchanged for w in writes),
        skipped=tuple(source.skipped),
        hlc=max(stamps, default=None),
    )
