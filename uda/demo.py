"""`make demo` / `uda demo`: index this repository, then ask it questions.

Runs on the embedded profile (no servers) in `.uda/demo`. The loader reads the README, the
decision records in docs/adr (as `Decision` elements) and the git history (authors,
timestamps); `.uda-policy.toml` makes the README public and the decision records internal, so
the same question asked by a public and an internal caller shows what clearance hides.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import uda
from ontology import Element, KnowledgeAsset

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / ".uda" / "demo"

QUESTIONS = [
    ("How is recency weighed against relevance?", ["public"]),
    ("How is recency weighed against relevance?", ["internal"]),
    ("What happens if an ingest is killed half way?", ["internal"]),
]


def _describe(element: Element, score: float, snippet: str) -> list[str]:
    lines = [f"  {score:.4f}  {type(element).__name__:<9} {element.name}"]
    prose = [ln.strip() for ln in snippet.splitlines() if ln.strip() and not ln.startswith("#")]
    if prose:
        lines.append(f"          {prose[0][:96]}")
    context: list[str] = []
    if isinstance(element, KnowledgeAsset):
        if element.repository is not None:
            context.append(f"repository {element.repository.name}")
        context += [f"governed by {d.name}" for d in element.decisions[:2]]
        if element.authors:
            context.append("by " + ", ".join(a.name for a in element.authors[:3]))
    if context:
        lines.append("          " + "; ".join(context))
    return lines


def main() -> int:
    """Index, ask, print."""
    started = time.perf_counter()
    with uda.connect(path=STORE) as client:
        # The same ingest as `uda ingest`: batches, and tombstones for files that vanished.
        indexed = client.ingest_source(ROOT)
        print(
            f"indexed {indexed.repository}: {indexed.loaded} elements "
            f"({indexed.written} new or changed, {indexed.unchanged} unchanged), "
            f"{indexed.chunks} chunks embedded {indexed.embedded}, "
            f"{indexed.edges} new edges, in {time.perf_counter() - started:.1f} s\n"
        )
        last = None
        for question, clearance in QUESTIONS:
            last = client.search(question, limit=3, clearance_scope=clearance)
            print(f"Q: {question}\n   as a caller cleared for {', '.join(clearance)}:")
            for element, result in zip(last.to_elements(), last.results, strict=True):
                print("\n".join(_describe(element, result.score, result.snippet or "")))
            if not last.results:
                print("  (nothing this clearance may see)")
            print()
        if last is not None:
            print("How the last answer was ranked (res.explain()):\n")
            print(last.explain())
    print(
        "\nNext: index your own repository and ask it something:\n"
        "  .venv/bin/uda ingest /path/to/your/repo\n"
        '  .venv/bin/uda search "why did we choose this database?" --explain'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
