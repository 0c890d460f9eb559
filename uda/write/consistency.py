"""`check` and `repair`: every derived store against the system of record.

The system of record says what each derived store should hold: every chunk (with the
`valid_to` of its state) for the vector and text stores, every element as a node and every
edge (with its interval) for the graph stores. `check` lists what differs, per store:

- **missing**: in the system of record, not in the store (a lost write, an operator's delete);
- **extra**: in the store, not in the system of record (nothing the write path would put there);
- **stale**: in both, with another validity (a missed supersede or delete);
- **pending**: outbox entries not applied yet (an interrupted write; `sync` applies them).

`repair` goes through the write path's own machinery: it finishes interrupted writes, re-sends
missing and stale keys by adding outbox entries and draining them (`Writer.sync`), and deletes
extras directly, since the outbox can only carry what the record holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from connectors.base import GraphCapable, RelationalCapable, TextCapable, VectorCapable
from connectors.contract.system_of_record import OutboxItem, state_key
from uda.write.writer import DerivedStore, Role, Writer

EdgeKey = tuple[str, str, str]
K = TypeVar("K", str, EdgeKey)

EXAMPLES = 5  # ids named per category when a report is printed; counts are always complete


@dataclass(frozen=True, kw_only=True)
class StoreReport:
    """How one derived store differs from the system of record.

    `missing`, `extra` and `stale` hold chunk ids in a vector or text store and node ids in a
    graph store (nodes carry no validity, so they are never stale); the `*_edges` fields hold
    a graph store's edge keys `(source_id, relation, target_id)`. Every tuple is sorted and
    complete; only `pending_examples` is cut to a few.

    Attributes:
        store: the store's outbox name, `role:connector` (`vector:chroma`).
        role: `vector`, `text` or `graph`.
        checked: chunks (vector, text) or nodes (graph) the system of record holds for it.
        checked_edges: edges the system of record holds for it (graph only).
        pending: outbox entries not yet applied to it.
        pending_examples: the oldest few of them.
        index_drift: search-index entries out of step with the stored chunks (text only).
    """

    store: str
    role: Role
    checked: int = 0
    checked_edges: int = 0
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    missing_edges: tuple[EdgeKey, ...] = ()
    extra_edges: tuple[EdgeKey, ...] = ()
    stale_edges: tuple[EdgeKey, ...] = ()
    pending: int = 0
    pending_examples: tuple[OutboxItem, ...] = ()
    index_drift: int = 0

    @property
    def differences(self) -> int:
        """How many ids and edges differ, plus index entries out of step."""
        return (
            len(self.missing)
            + len(self.extra)
            + len(self.stale)
            + len(self.missing_edges)
            + len(self.extra_edges)
            + len(self.stale_edges)
            + self.index_drift
        )

    @property
    def clean(self) -> bool:
        """Whether the store matches the system of record with nothing pending."""
        return self.differences == 0 and self.pending == 0

    def __str__(self) -> str:
        items = "nodes" if self.role == "graph" else "chunks"
        size = f"{self.checked} {items}"
        if self.role == "graph":
            size += f", {self.checked_edges} edges"
        if self.clean:
            return f"{self.store}: clean ({size})"
        found = [f"{self.differences} differences"] if self.differences else []
        found += [f"{self.pending} pending outbox entries"] if self.pending else []
        lines = [f"{self.store}: {', '.join(found)} ({size})"]
        lines += _lines(f"missing {items} (in the record, not in the store)", self.missing)
        lines += _lines(f"extra {items} (in the store, not in the record)", self.extra)
        lines += _lines(f"stale {items} (validity differs)", self.stale)
        lines += _lines("missing edges", [_edge_text(k) for k in self.missing_edges])
        lines += _lines("extra edges", [_edge_text(k) for k in self.extra_edges])
        lines += _lines("stale edges (validity differs)", [_edge_text(k) for k in self.stale_edges])
        if self.index_drift:
            lines.append(f"  search index entries out of step with the chunks: {self.index_drift}")
        if self.pending:
            shown = [_outbox_text(item) for item in self.pending_examples]
            lines.append(f"  pending (sync applies them): {_examples(shown, self.pending)}")
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class ConsistencyReport:
    """What `check` found, one `StoreReport` per derived store (index it by store name)."""

    stores: tuple[StoreReport, ...]

    @property
    def clean(self) -> bool:
        """Whether every store matches the system of record with nothing pending."""
        return all(store.clean for store in self.stores)

    def __getitem__(self, store: str) -> StoreReport:
        for report in self.stores:
            if report.store == store:
                return report
        raise KeyError(f"no store {store!r}; checked: {[s.store for s in self.stores]}")

    def __str__(self) -> str:
        verdict = "every store matches the system of record" if self.clean else "the stores differ"
        return "\n".join([verdict, *(str(store) for store in self.stores)])


@dataclass(frozen=True, kw_only=True)
class RepairReport:
    """What `repair` did, with the checks before and after it.

    Attributes:
        before: the check given or made first (what the pending outbox then fixed included).
        after: a fresh check once the repair finished (`clean` unless writes raced it).
        enqueued: outbox entries added per store (missing and stale keys re-sent).
        deleted: extras removed per store (chunks, or edges and nodes).
        reindexed: stores whose search index was rebuilt.
        applied: outbox entries applied per store: those an interrupted write left, then the
            re-sent ones.
    """

    before: ConsistencyReport
    after: ConsistencyReport
    enqueued: Mapping[str, int]
    deleted: Mapping[str, int]
    reindexed: tuple[str, ...]
    applied: Mapping[str, int]

    @property
    def clean(self) -> bool:
        """Whether every store matched the system of record after the repair."""
        return self.after.clean

    def __str__(self) -> str:
        done: list[str] = []
        for store in (s.store for s in self.before.stores):
            work = [
                f"re-sent {self.enqueued.get(store, 0)}" if self.enqueued.get(store) else "",
                f"deleted {self.deleted.get(store, 0)}" if self.deleted.get(store) else "",
                f"applied {self.applied.get(store, 0)}" if self.applied.get(store) else "",
                "rebuilt its index" if store in self.reindexed else "",
            ]
            done.append(f"  {store}: {', '.join(w for w in work if w) or 'nothing to do'}")
        return "\n".join(
            [
                "repair (outbox entries re-sent and applied, extras deleted):",
                *done,
                f"after the repair: {self.after}",
            ]
        )


@dataclass(frozen=True, kw_only=True)
class _Found:
    """What one store holds, as read by `check`."""

    chunks: Mapping[str, int] | None = None
    nodes: Collection[str] = ()
    edges: Mapping[EdgeKey, tuple[int, int]] | None = None
    index_drift: int = 0


async def check(
    system_of_record: RelationalCapable,
    stores: Sequence[DerivedStore],
) -> ConsistencyReport:
    """Compare every derived store with the system of record.

    Reads each store whole, then the record (one query per kind). Safe beside writes: the
    stores are read first and the record never deletes a chunk, edge or element, so whatever a
    store holds that the record then lacks is truly extra; a write racing the check can only
    show up as missing, stale or pending, and re-sending those is harmless.

    Args:
        system_of_record: the profile's `RelationalCapable` connector.
        stores: the derived stores to check (`uda.write.writer.derived_stores`).
    """
    found = await asyncio.gather(*(_read(store) for store in stores))
    roles = {store.role for store in stores}
    chunks: Mapping[str, int] = (
        await system_of_record.expected_chunks() if roles & {"vector", "text"} else {}
    )
    edges: Mapping[EdgeKey, tuple[int, int]] = {}
    nodes: Collection[str] = ()
    if "graph" in roles:
        edges = await system_of_record.expected_edges()
        nodes = (await system_of_record.latest_versions()).keys()
    pending = await system_of_record.pending_counts()
    reports: list[StoreReport] = []
    for store, held in zip(stores, found, strict=True):
        waiting = pending.get(store.key, 0)
        shown = tuple(await system_of_record.pending(store.key, EXAMPLES)) if waiting else ()
        if held.chunks is not None:
            missing, extra, stale = _diff(chunks, held.chunks)
            report = StoreReport(
                store=store.key,
                role=store.role,
                checked=len(chunks),
                missing=missing,
                extra=extra,
                stale=stale,
                index_drift=held.index_drift,
                pending=waiting,
                pending_examples=shown,
            )
        else:
            missing, extra, _ = _diff(dict.fromkeys(nodes, 0), dict.fromkeys(held.nodes, 0))
            gone, more, stale = _diff(edges, held.edges or {})
            report = StoreReport(
                store=store.key,
                role=store.role,
                checked=len(nodes),
                checked_edges=len(edges),
                missing=missing,
                extra=extra,
                missing_edges=gone,
                extra_edges=more,
                stale_edges=stale,
                pending=waiting,
                pending_examples=shown,
            )
        reports.append(report)
    return ConsistencyReport(stores=tuple(reports))


async def repair(
    system_of_record: RelationalCapable,
    stores: Sequence[DerivedStore],
    writer: Writer,
    report: ConsistencyReport | None = None,
) -> RepairReport:
    """Make every derived store match the system of record again, then check once more.

    Interrupted writes are finished first (`writer.sync()`), and the stores checked again if
    that applied anything, so that only real damage is re-sent. Then missing and stale keys
    are re-sent through the outbox and drained; extras are deleted from their store; a text
    store whose search index drifted has it rebuilt.

    Args:
        system_of_record: the profile's `RelationalCapable` connector.
        stores: the derived stores, the same that `writer` feeds.
        writer: the write path whose drain applies the outbox.
        report: a check to work from (None: check now).

    Raises:
        KeyError: `report` names a store that is not among `stores`.
    """
    before = report if report is not None else await check(system_of_record, stores)
    by_key = {store.key: store for store in stores}
    unknown = [found.store for found in before.stores if found.store not in by_key]
    if unknown:
        raise KeyError(f"the report names stores that are not among the stores: {unknown}")
    finished = await writer.sync()
    current = await check(system_of_record, stores) if any(finished.values()) else before
    enqueued: dict[str, int] = {}
    deleted: dict[str, int] = {}
    reindexed: list[str] = []
    for found in current.stores:
        store = by_key[found.store]
        enqueued[store.key] = await _resend(system_of_record, store, found)
        deleted[store.key] = await _delete_extras(store, found)
        connector = store.connector
        if found.index_drift and isinstance(connector, TextCapable):
            await connector.rebuild_text_index()
            reindexed.append(store.key)
    resent = await writer.sync()
    return RepairReport(
        before=before,
        after=await check(system_of_record, stores),
        enqueued=enqueued,
        deleted=deleted,
        reindexed=tuple(reindexed),
        applied={key: finished.get(key, 0) + resent.get(key, 0) for key in by_key},
    )


async def _read(store: DerivedStore) -> _Found:
    connector = store.connector
    if store.role == "vector" and isinstance(connector, VectorCapable):
        return _Found(chunks=await connector.chunk_states())
    if store.role == "text" and isinstance(connector, TextCapable):
        chunks, drift = await asyncio.gather(
            connector.text_chunk_states(), connector.text_index_drift()
        )
        return _Found(chunks=chunks, index_drift=drift)
    if store.role == "graph" and isinstance(connector, GraphCapable):
        nodes, edges = await asyncio.gather(connector.node_ids(), connector.edge_states())
        return _Found(nodes=nodes, edges=edges)
    raise TypeError(f"{store.key}: the connector lacks the {store.role} capability")


def _diff(
    expected: Mapping[K, object], held: Mapping[K, object]
) -> tuple[tuple[K, ...], tuple[K, ...], tuple[K, ...]]:
    """Missing, extra and stale keys, each sorted."""
    missing = sorted(key for key in expected if key not in held)
    extra = sorted(key for key in held if key not in expected)
    stale = sorted(key for key, value in expected.items() if key in held and held[key] != value)
    return tuple(missing), tuple(extra), tuple(stale)


async def _resend(sor: RelationalCapable, store: DerivedStore, found: StoreReport) -> int:
    """Add outbox entries for what the store lacks or holds stale; returns how many."""
    if store.role == "graph":
        # Any state of an element makes the drain upsert its node from the newest state.
        latest = await sor.latest_states(list(found.missing)) if found.missing else {}
        states = [(eid, state.version) for eid, state in sorted(latest.items())]
        edges = [*found.missing_edges, *found.stale_edges]
    else:
        # One entry per state: the drain re-sends all of that state's chunks.
        states = sorted({state_key(chunk) for chunk in (*found.missing, *found.stale)})
        edges = []
    if states:
        await sor.enqueue(store.key, "state", states)
    if edges:
        await sor.enqueue(store.key, "edge", edges)
    return len(states) + len(edges)


async def _delete_extras(store: DerivedStore, found: StoreReport) -> int:
    """Remove what the record does not hold; returns how many ids and edges went."""
    connector = store.connector
    extra = list(found.extra)
    if store.role == "vector" and isinstance(connector, VectorCapable) and extra:
        await connector.delete_chunk_ids(extra)
    elif store.role == "text" and isinstance(connector, TextCapable) and extra:
        await connector.delete_text_chunks(extra)
    elif store.role == "graph" and isinstance(connector, GraphCapable):
        if found.extra_edges:
            await connector.delete_edges(found.extra_edges)
        if extra:
            await connector.delete_nodes(extra)
    return len(extra) + len(found.extra_edges)


def _lines(label: str, ids: Sequence[str]) -> list[str]:
    return [f"  {label}: {len(ids)}: {_examples(ids[:EXAMPLES], len(ids))}"] if ids else []


def _examples(shown: Sequence[str], total: int) -> str:
    more = total - len(shown)
    return ", ".join(shown) + (f", and {more} more" if more > 0 else "")


def _edge_text(key: EdgeKey) -> str:
    source, relation, target = key
    return f"{source} -{relation}-> {target}"


def _outbox_text(item: OutboxItem) -> str:
    if item.kind == "edge":
        return "edge " + _edge_text((item.key[0], item.key[1], item.key[2]))
    return f"state {item.key[0]}@{item.key[1]}"
