"""Questions about the KEPs that their metadata answers, and how answers are judged.

`benchmarks.keps` turns the proposals into an ontology; this module asks of it.

Queries (all built from metadata, answers judged by metadata, per caller):
- `lookup`: a proposal's title -> that decision (a sample of the proposals);
- `exact_title`: every proposal's title -> that decision (or any proposal of the same title,
  case and whitespace folded), expected at rank 1 (`recall@1`);
- `identifier`: a proposal's own `KEP-<number>` token, where that token occurs (as a whole
  word, any case) in the text of that proposal's elements and of no other, and is an
  identifier by `uda.query.exact.is_identifier` (a number of 3+ digits: `KEP-19` is no more
  an identifier there than `IL-6`) -> that decision, expected at rank 1;
- `replaced_by`: "Which KEP replaced <old title>?" -> the replacing decision, as a result or
  as a context node (`supersedes`, incoming) of a result;
- `sig_status`: "<sig> enhancement proposals" filtered on `status` -> every visible decision
  of that SIG with that status;
- `since`: "<sig> enhancement proposals" filtered on `decided_on >= <date>`.
Every result and context node is also checked against the caller's clearance: `leaks`
counts what a caller should not have seen (target 0).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from benchmarks.keps import Kep, clearance_table, resolve_refs
from ontology import Element
from uda.query.clearance import Clearance
from uda.query.exact import is_identifier

CALLERS: tuple[tuple[str, ...], ...] = (
    ("public",),
    ("internal",),
    ("confidential", "project:sig-node"),
    ("restricted", "project:*"),
)
AT_ONE = frozenset({"lookup", "exact_title", "identifier"})  # kinds judged at rank 1 too
_KEP_TOKEN = re.compile(r"\bKEP-(\d+)\b", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class KepQuery:
    """A question with its metadata-determined answer set (decision ids)."""

    kind: str
    text: str
    answers: frozenset[str]
    options: dict[str, Any] = field(default_factory=dict[str, Any])
    via_context: str | None = None  # relation through which a context node may answer


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def identifier_queries(keps: Sequence[Kep], elements: Sequence[Element]) -> list[KepQuery]:
    """`KEP-<number>` of each proposal whose token no other proposal's elements hold.

    The query is the token as its proposal's text first writes it, if that is an identifier
    by `uda.query.exact.is_identifier` (three digits or more); the elements are those
    ingested (their text as capped by the preset).
    """
    owner = {k.decision_id: k for k in keps} | {k.document_id: k for k in keps}
    holders: dict[int, set[str]] = defaultdict(set)  # number -> decision ids holding it
    first: dict[tuple[str, int], str] = {}  # (decision id, number) -> the token as written
    for e in elements:
        k = owner.get(e.element_id)
        text = f"{e.name}\n{getattr(e, 'text', '')}"
        for match in _KEP_TOKEN.finditer(text):
            number = int(match.group(1))
            holder = k.decision_id if k is not None else e.element_id
            holders[number].add(holder)
            first.setdefault((holder, number), match.group(0))
    queries: list[KepQuery] = []
    for k in keps:
        if k.number is None or holders.get(k.number) != {k.decision_id}:
            continue
        token = first[(k.decision_id, k.number)]
        if not is_identifier(token):
            continue
        queries.append(KepQuery(kind="identifier", text=token, answers=frozenset({k.decision_id})))
    return queries


def kep_queries(
    keps: Sequence[Kep],
    *,
    lookups: int | None = None,
    elements: Sequence[Element] | None = None,
) -> list[KepQuery]:
    """Metadata questions over the loaded proposals (see the module doc).

    `exact_title` questions cover every proposal; `identifier` questions need the ingested
    `elements` (none without them).
    """
    by_path = {k.path: k for k in keps}
    queries: list[KepQuery] = []
    step = max(1, len(keps) // lookups) if lookups else 1
    for k in keps[::step]:
        queries.append(KepQuery(kind="lookup", text=k.title, answers=frozenset({k.decision_id})))
    same_title: dict[str, set[str]] = defaultdict(set)
    for k in keps:
        same_title[_folded(k.title)].add(k.decision_id)
    for k in keps:
        queries.append(
            KepQuery(
                kind="exact_title",
                text=k.title,
                answers=frozenset(same_title[_folded(k.title)]),
            )
        )
    if elements is not None:
        queries += identifier_queries(keps, elements)
    for k in keps:
        for old in resolve_refs(k.replaces, keps):
            if old != k.path:
                queries.append(
                    KepQuery(
                        kind="replaced_by",
                        text=f"Which KEP replaced {by_path[old].title}?",
                        answers=frozenset({k.decision_id}),
                        via_context="supersedes",
                    )
                )
    groups: dict[tuple[str, str], set[str]] = defaultdict(set)
    for k in keps:
        if k.status:
            groups[(k.sig, k.status)].add(k.decision_id)
    for (sig, status), ids in sorted(groups.items()):
        if len(ids) >= 3:
            queries.append(
                KepQuery(
                    kind="sig_status",
                    text=f"{sig} enhancement proposals",
                    answers=frozenset(ids),
                    options={"context_filters": {"status": status}, "element_types": ["Decision"]},
                )
            )
    cut = date(2023, 1, 1)
    recent: dict[str, set[str]] = defaultdict(set)
    for k in keps:
        if k.created and k.created >= cut:
            recent[k.sig].add(k.decision_id)
    for sig, ids in sorted(recent.items()):
        if len(ids) >= 3:
            queries.append(
                KepQuery(
                    kind="since",
                    text=f"{sig} enhancement proposals",
                    answers=frozenset(ids),
                    options={
                        "context_filters": {"decided_on": {"$gte": cut.isoformat()}},
                        "element_types": ["Decision"],
                    },
                )
            )
    return queries


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a system returned for one question: ranked ids and, per id, its context ids."""

    ids: Sequence[str]
    context: dict[str, list[tuple[str, str, str]]] = field(
        default_factory=dict[str, list[tuple[str, str, str]]]
    )  # id -> (context id, relation, direction)
    statuses: dict[str, str | None] = field(default_factory=dict[str, str | None])


def evaluate(
    queries: Sequence[KepQuery],
    keps: Sequence[Kep],
    ask: Callable[[KepQuery, tuple[str, ...]], Answer],
    *,
    limit: int = 10,
    callers: Sequence[tuple[str, ...]] = CALLERS,
) -> dict[str, dict[str, float]]:
    """Per query kind: recall@limit, MRR, precision, filter exactness and leaks, per caller.

    `recall@1` (kinds in `AT_ONE`): the share of questions whose first result answers them.
    """
    table = clearance_table(keps)
    status_of = {k.decision_id: k.status for k in keps}
    figures: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    leaks = 0
    for caller in callers:
        clearance = Clearance.parse(caller)

        def visible(eid: str, clearance: Clearance = clearance) -> bool:
            level, scope = table.get(eid, ("restricted", "project:?"))
            return clearance.allows(level, scope)

        for q in queries:
            answer = ask(q, caller)
            seen = list(answer.ids)
            for eid in seen:
                leaks += not visible(eid)
                leaks += sum(not visible(c) for c, _, _ in answer.context.get(eid, ()))
            truth = {a for a in q.answers if visible(a)}
            if not truth:
                continue
            f = figures[q.kind]
            top = seen[:limit]
            f["recall"].append(len(truth & set(top)) / min(len(truth), limit))
            rank = next((i for i, e in enumerate(top, start=1) if e in truth), None)
            f["mrr"].append(1.0 / rank if rank else 0.0)
            if q.kind in AT_ONE:
                f["recall@1"].append(float(rank == 1))
            if q.kind in ("sig_status", "since"):
                f["precision"].append(len(truth & set(top)) / limit)
                wanted = q.options.get("context_filters", {}).get("status")
                if wanted is not None and top:
                    f["filter_exact"].append(
                        sum(status_of.get(e) == wanted for e in top) / len(top)
                    )
            if q.via_context:
                reached = set(top)
                for eid in top:
                    reached |= {
                        c for c, rel, _ in answer.context.get(eid, ()) if rel == q.via_context
                    }
                f["reachable"].append(float(bool(truth & reached)))
    out: dict[str, dict[str, float]] = {}
    for kind, metrics in figures.items():
        out[kind] = {name: sum(v) / len(v) for name, v in metrics.items() if v}
        out[kind]["questions"] = float(len(metrics.get("recall", [])))
    out["all"] = {"leaks": float(leaks), "callers": float(len(callers))}
    return out
