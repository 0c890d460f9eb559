"""Kubernetes Enhancement Proposals as an ontology, read from their folders.

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

The questions the metadata answers, and how answers are judged, are in
`benchmarks.kep_questions`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
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

LEVELS = ("public", "internal", "confidential", "restricted")
REPO_ID = "repo:kubernetes-enhancements"
_REF = re.compile(r"keps/((?:[\w.-]+/)*?[\w.-]*?(\d+)-[\w.-]+?)(?:\.md)?/?$")
_TOC = re.compile(r"<!-- toc -->.*?<!-- /toc -->", re.DOTALL)
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
_STATUSES = {s.value for s in DecisionStatus}


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
