"""Kubernetes Enhancement Proposals as an ontology, and queries the metadata answers.

Each proposal folder (`keps/<sig>/[...]/<number>-<name>/` with `kep.yaml` and `README.md`)
becomes:

- a `Decision` (`kep:<path>`): the kep.yaml record — title, owning SIG, status, stage and
  the README's Summary section as text; `decided_on` = creation-date, `timestamp` =
  last-updated (else creation-date);
- a `Document` (`kepdoc:<path>`): the README (without its table of contents), capped at
  `max_words` words by the small presets; `governedBy` its decision;
- a `SystemComponent` (kind sig) per SIG, a `Person` per author handle, one `Repository`.

Relations: decision `partOf` owning SIG, document `partOf` the repository, decision
`authoredBy` each author, `supersedes` for `replaces`, `relatedTo` for `see-also` (both only
when the target proposal is loaded). Clearance is a deterministic mix by a hash of the path:
55 % public, 25 % internal, 13 % confidential, 7 % restricted; 15 % scoped to
`project:<owning sig>`; a proposal's document shares its decision's clearance.

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

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml

from ontology import (
    Decision,
    DecisionStatus,
    Document,
    Element,
    Person,
    Relation,
    Repository,
    SystemComponent,
)
from uda.query.clearance import Clearance
from uda.query.exact import is_identifier

LEVELS = ("public", "internal", "confidential", "restricted")
CALLERS: tuple[tuple[str, ...], ...] = (
    ("public",),
    ("internal",),
    ("confidential", "project:sig-node"),
    ("restricted", "project:*"),
)
REPO_ID = "repo:kubernetes-enhancements"
_REF = re.compile(r"keps/((?:[\w.-]+/)*?[\w.-]*?(\d+)-[\w.-]+?)(?:\.md)?/?$")
_TOC = re.compile(r"<!-- toc -->.*?<!-- /toc -->", re.DOTALL)
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
_STATUSES = {s.value for s in DecisionStatus}
_KEP_TOKEN = re.compile(r"\bKEP-(\d+)\b", re.IGNORECASE)
AT_ONE = frozenset({"lookup", "exact_title", "identifier"})  # kinds judged at rank 1 too


@dataclass(frozen=True, kw_only=True)
class Kep:
    """One proposal as read from its folder."""

    path: str  # relative to keps/, e.g. sig-node/1029-ephemeral-storage-quotas
    number: int | None
    title: str
    sig: str
    status: str | None
    stage: str | None
    created: date | None
    updated: date | None
    authors: tuple[str, ...]
    see_also: tuple[str, ...]
    replaces: tuple[str, ...]
    summary: str
    readme: str
    sensitivity: str
    scope: str | None

    @property
    def decision_id(self) -> str:
        """Element id of the proposal's decision."""
        return f"kep:{self.path}"

    @property
    def document_id(self) -> str:
        """Element id of the proposal's README document."""
        return f"kepdoc:{self.path}"


def _date(value: object) -> date | None:
    text = str(value or "").strip().strip("\"'")
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _status(value: object) -> str | None:
    word = str(value or "").strip().split(" ")[0].split("#")[0].strip().lower()
    return word if word in _STATUSES else None


def _list(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return [str(value).strip()] if value else []


def clearance_of(path: str, sig: str) -> tuple[str, str | None]:
    """The deterministic sensitivity and scope of a proposal."""
    digest = hashlib.sha256(path.encode()).digest()
    bucket, scope_bucket = digest[0] * 100 // 256, digest[1] * 100 // 256
    level = "public" if bucket < 55 else "internal" if bucket < 80 else "confidential"
    if bucket >= 93:
        level = "restricted"
    return level, (f"project:{sig}" if scope_bucket < 15 else None)


def _sections(readme: str) -> dict[str, str]:
    body = _TOC.sub("", readme)
    out: dict[str, str] = {}
    matches = list(_SECTION.finditer(body))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        out.setdefault(m.group(1).strip().lower(), body[m.end() : end].strip())
    return out


def read_keps(root: Path, *, limit: int | None = None) -> list[Kep]:
    """Every proposal under `root` (the `keps/` folder), sorted by path; templates skipped.

    `limit` keeps the first proposals of a stable order that puts those taking part in a
    `replaces` link first, so that small presets still have `replaced_by` questions.
    """
    keps: list[Kep] = []
    for meta in sorted(root.rglob("kep.yaml")):
        folder = meta.parent
        path = folder.relative_to(root).as_posix()
        if "template" in path.lower() or folder.name.startswith(("NNNN", "0000")):
            continue
        data = yaml.load(meta.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader builds plain strings only
        if not isinstance(data, dict):
            continue
        info: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
        readme_file = folder / "README.md"
        readme = readme_file.read_text(encoding="utf-8") if readme_file.exists() else ""
        sections = _sections(readme)
        sig = str(info.get("owning-sig") or path.split("/")[0]).strip()
        number = re.match(r"(\d+)-", folder.name)
        level, scope = clearance_of(path, sig)
        title = str(info.get("title") or folder.name).strip().strip("\"'") or folder.name
        keps.append(
            Kep(
                path=path,
                number=int(number.group(1)) if number else None,
                title=title,
                sig=sig,
                status=_status(info.get("status")),
                stage=str(info.get("stage") or "").strip() or None,
                created=_date(info.get("creation-date")),
                updated=_date(info.get("last-updated")),
                authors=tuple(a.lstrip("@") for a in _list(info.get("authors"))),
                see_also=tuple(_list(info.get("see-also"))),
                replaces=tuple(_list(info.get("replaces"))),
                summary=sections.get("summary", ""),
                readme=_TOC.sub("", readme).strip(),
                sensitivity=level,
                scope=scope,
            )
        )
    if limit is not None:
        linked = {k.path for k in keps if resolve_refs(k.replaces, keps)}
        linked |= {t for k in keps for t in resolve_refs(k.replaces, keps)}
        keps = sorted(keps, key=lambda k: (k.path not in linked, k.path))[:limit]
        keps.sort(key=lambda k: k.path)
    return keps


def resolve_refs(refs: Sequence[str], keps: Sequence[Kep]) -> list[str]:
    """Paths of the loaded proposals that references point to (by path, else unique number)."""
    by_path = {k.path: k for k in keps}
    numbers = Counter(k.number for k in keps)
    by_number = {k.number: k for k in keps if numbers[k.number] == 1}
    out: list[str] = []
    for ref in refs:
        match = _REF.search(ref.strip().strip("\"'"))
        if match is None:
            continue
        path, number = match.group(1).rstrip("/"), int(match.group(2))
        target = by_path.get(path) or by_number.get(number)
        if target is not None and target.path not in out:
            out.append(target.path)
    return out


def _words(text: str, limit: int | None) -> str:
    if limit is None:
        return text
    words = text.split(" ")
    return text if len(words) <= limit else " ".join(words[:limit])


def _stamp(day: date | None) -> datetime:
    return (
        datetime(day.year, day.month, day.day, tzinfo=UTC)
        if day
        else datetime(2020, 1, 1, tzinfo=UTC)
    )


def kep_elements(
    keps: Sequence[Kep], *, max_words: int | None = None
) -> tuple[list[Element], list[Relation]]:
    """The ontology of the proposals (see the module doc)."""
    elements: list[Element] = [
        Repository(
            element_id=REPO_ID,
            name="kubernetes/enhancements",
            url="https://github.com/kubernetes/enhancements",
            sensitivity="public",
        )
    ]
    relations: list[Relation] = []
    sigs = sorted({k.sig for k in keps})
    elements += [
        SystemComponent(element_id=f"sig:{s}", name=s, kind="sig", sensitivity="public")
        for s in sigs
    ]
    people = sorted({a for k in keps for a in k.authors})
    elements += [
        Person(element_id=f"person:{a}", name=a, handle=a, sensitivity="public") for a in people
    ]
    for k in keps:
        header = (
            f"{k.title}\nKEP {k.number if k.number is not None else ''} of {k.sig}. "
            f"Status: {k.status or 'unknown'}. Stage: {k.stage or 'unknown'}."
        )
        common = {
            "sensitivity": k.sensitivity,
            "scope": k.scope,
            "timestamp": _stamp(k.updated or k.created),
        }
        elements.append(
            Decision(
                element_id=k.decision_id,
                name=k.title[:1000],
                text=f"{header}\n\n{_words(k.summary, 400)}".strip(),
                status=k.status,
                decided_on=k.created,
                extras={"sig": k.sig, "kep_number": str(k.number or "")},
                **common,
            )
        )
        if k.readme.strip():
            elements.append(
                Document(
                    element_id=k.document_id,
                    name=f"{k.title} (README)"[:1000],
                    text=_words(k.readme, max_words),
                    **common,
                )
            )
            relations.append(
                Relation(source_id=k.document_id, relation="governedBy", target_id=k.decision_id)
            )
            relations.append(
                Relation(source_id=k.document_id, relation="partOf", target_id=REPO_ID)
            )
        relations.append(
            Relation(source_id=k.decision_id, relation="partOf", target_id=f"sig:{k.sig}")
        )
        for a in dict.fromkeys(k.authors):
            relations.append(
                Relation(source_id=k.decision_id, relation="authoredBy", target_id=f"person:{a}")
            )
        for old in resolve_refs(k.replaces, keps):
            if old != k.path:
                relations.append(
                    Relation(source_id=k.decision_id, relation="supersedes", target_id=f"kep:{old}")
                )
        for other in resolve_refs(k.see_also, keps):
            if other != k.path:
                relations.append(
                    Relation(
                        source_id=k.decision_id, relation="relatedTo", target_id=f"kep:{other}"
                    )
                )
    return elements, relations


def clearance_table(keps: Sequence[Kep]) -> dict[str, tuple[str, str | None]]:
    """Ground truth: every element id -> (sensitivity, scope); context nodes are public."""
    table: dict[str, tuple[str, str | None]] = {REPO_ID: ("public", None)}
    for k in keps:
        table[k.decision_id] = table[k.document_id] = (k.sensitivity, k.scope)
        table[f"sig:{k.sig}"] = ("public", None)
        for a in k.authors:
            table[f"person:{a}"] = ("public", None)
    return table


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
