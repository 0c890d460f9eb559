"""`make demo`: ingest this repository's own docs and decision records, then ask questions.

Runs on the embedded profile (no servers) in `.uda/demo`. The README is public, decision
records are internal, so the same question answered under two clearances shows what
clearance hides; each answer prints its typed results, graph context and explain plan.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import uda
from ontology import (
    Decision,
    DecisionStatus,
    Document,
    Element,
    Person,
    Relation,
    Repository,
    Sensitivity,
)

ROOT = Path(__file__).resolve().parent.parent
_STATUS = re.compile(r"^Status:\s*(\w+)", re.MULTILINE | re.IGNORECASE)
_TITLE = re.compile(r"^#\s+(.+)$", re.MULTILINE)
_ADR_REF = re.compile(r"ADR\s+(\d+)|adr/(\d{4})")

QUESTIONS = [
    ("How is recency weighed against relevance?", ["public"]),
    ("How is recency weighed against relevance?", ["internal"]),
    ("What happens if an ingest is killed half way?", ["internal"]),
]


def _git(*args: str) -> str:
    try:
        return subprocess.run(  # noqa: S603 - fixed git arguments
            ["git", "-C", str(ROOT), *args],  # noqa: S607 - git from PATH
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _last_commit_time(path: Path) -> datetime:
    stamp = _git("log", "-1", "--format=%cI", "--", str(path.relative_to(ROOT)))
    return datetime.fromisoformat(stamp) if stamp else datetime.now(UTC)


def corpus() -> tuple[list[Element], list[Relation]]:
    """The project's README and decision records as typed elements and relations."""
    repo = Repository(element_id="repo:uda", name="uda", sensitivity=Sensitivity.PUBLIC)
    elements: list[Element] = [repo]
    relations: list[Relation] = []
    readme = ROOT / "README.md"
    if readme.exists():
        elements.append(
            Document(
                element_id="doc:README.md",
                name="README",
                uri="README.md",
                text=readme.read_text(),
                sensitivity=Sensitivity.PUBLIC,
                timestamp=_last_commit_time(readme),
            )
        )
    for path in sorted((ROOT / "docs" / "adr").glob("*.md")):
        text = path.read_text()
        title = _TITLE.search(text)
        status = _STATUS.search(text)
        number = path.name.split("-", 1)[0]
        known = {s.value: s for s in DecisionStatus}
        elements.append(
            Decision(
                element_id=f"adr:{number}",
                name=title.group(1) if title else path.stem,
                uri=str(path.relative_to(ROOT)),
                text=text,
                sensitivity=Sensitivity.INTERNAL,
                status=known.get(status.group(1).lower()) if status else None,
                timestamp=_last_commit_time(path),
            )
        )
    ids = {e.element_id for e in elements}
    for element in elements[1:]:
        relations.append(
            Relation(source_id=element.element_id, relation="partOf", target_id=repo.element_id)
        )
        for match in _ADR_REF.finditer(getattr(element, "text", "")):
            target = f"adr:{int(match.group(1) or match.group(2)):04d}"
            if target in ids and target != element.element_id:
                relations.append(
                    Relation(source_id=element.element_id, relation="governedBy", target_id=target)
                )
    authors = _git("log", "--format=%an", "--", "docs", "README.md").splitlines()
    for name in sorted(set(authors)):
        person = Person(element_id=f"person:{name}", name=name, sensitivity=Sensitivity.PUBLIC)
        elements.append(person)
        relations.append(
            Relation(source_id="repo:uda", relation="authoredBy", target_id=person.element_id)
        )
    return elements, list({r.key: r for r in relations}.values())


def main() -> int:
    """Ingest, ask, print."""
    started = time.perf_counter()
    elements, relations = corpus()
    with uda.connect(path=ROOT / ".uda" / "demo") as client:
        report = client.ingest(elements, relations)
        print(
            f"ingested {report.written} new states ({report.unchanged} unchanged), "
            f"{report.chunks} chunks, {report.edges} new edges "
            f"in {time.perf_counter() - started:.1f} s\n"
        )
        res = None
        for question, clearance in QUESTIONS:
            res = client.search(question, limit=3, clearance_scope=clearance)
            print(f"Q: {question}   clearance={clearance}")
            for element, result in zip(res.to_elements(), res.results, strict=True):
                context = ", ".join(
                    f"{n['relation']}->{n['name']}" for n in result.context_nodes[:4]
                )
                print(f"  {result.score:.4f}  {type(element).__name__:<9} {element.name}")
                lines = [ln for ln in (result.snippet or "").splitlines() if ln.strip()]
                prose = [ln for ln in lines if not ln.startswith("#")] or lines or [""]
                print(f"          {prose[0][:90]}")
                print(f"          context: {context or 'none'}")
            if not res.results:
                print("  (nothing this clearance may see)")
            print()
        if res is not None:
            print("explain() of the last answer:\n")
            print(res.explain())
    return 0


if __name__ == "__main__":
    sys.exit(main())
