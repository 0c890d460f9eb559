"""`python -m benchmarks.revisions BEFORE AFTER`: search latency of two revisions, in turns.

The "no loss" checks (issue 20: search p50 at 100k chunks not more than 10 % slower) compare
two revisions. Two scale runs an hour apart do not settle that on a shared machine, whose
speed drifts by more than most changes cost (ADR 46). So this measures in turns: each
revision is checked out into a worktree of its own and fills its own store with the
synthetic corpus using its own code. In each turn both revisions' processes are started
fresh and open at once, and take each query in turn (before, after, then after, before for
the next query ...), so that the two searches of a query meet the machine within
milliseconds of each other (ADR 48). The figure per revision is the median of its turns'
p50s, with their spread; between them, the median of the per-query ratios. `--by-turn`
measures as the first design did: one process per revision and turn, alternating.

Writes `<before>..<after>.json` and `.md` under --out and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.datasets import PROJECT_ROOT
from benchmarks.revision_turn import DEPTHS as TURN_DEPTHS
from benchmarks.revision_turn import WARMUP as TURN_WARMUP

TURN = Path(__file__).resolve().parent / "revision_turn.py"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "revisions"
SHOWN = (
    "wall",
    "cpu",
    "cpu loop",
    "cpu sqlite",
    "cpu executor",
    "cpu caller",
    "cpu native",
    "phase1",
    "phase2",
    "phase3",
    "total",
    "hydrate",
)


class RevisionError(RuntimeError):
    """A revision that cannot be checked out, built or measured; the message says which."""


def _git(*args: str) -> str:
    try:
        done = subprocess.run(  # noqa: S603 - git with the revisions the user named, as a list
            ["git", *args],  # noqa: S607 - git from PATH, as the report uses it
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise RevisionError(f"git is needed to check revisions out: {exc}") from exc
    if done.returncode != 0:
        raise RevisionError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def _turn(checkout: Path, action: str, store: Path, chunks: int, queries: int, corpus: str) -> dict:
    done = subprocess.run(  # noqa: S603 - this interpreter and the project's own script
        [sys.executable, str(TURN), action, str(store), str(chunks), str(queries), corpus],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RevisionError(f"{action} at {checkout.name} failed:\n{tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class _Searcher:
    """A revision's `revision_turn.py serve` process: one search per request, its figures."""

    def __init__(self, checkout: Path, store: Path, chunks: int, queries: int, corpus: str) -> None:
        self._name = checkout.name
        self._errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(  # noqa: S603 - this interpreter and the project's script
            [sys.executable, str(TURN), "serve", str(store), str(chunks), str(queries), corpus],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
        )
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None:  # cannot happen with PIPE; pyright cannot tell
            raise RevisionError(f"no pipes to the search process at {self._name}")
        self._stdin, self._stdout = stdin, stdout
        self._read()  # {"ready": true}: the store is open

    def search(self, j: int, depth: int) -> dict[str, float]:
        """Query `j` at `depth`: wall, CPU, hydration and phase times in ms."""
        with contextlib.suppress(OSError):  # the process is gone: _read says why
            self._stdin.write(f"{j} {depth}\n")
            self._stdin.flush()
        return self._read()

    def _read(self) -> dict:
        line = self._stdout.readline()
        if not line:
            self._process.wait()
            self._errors.seek(0)
            tail = "\n".join(self._errors.read().strip().splitlines()[-5:])
            raise RevisionError(f"searching at {self._name} failed:\n{tail}")
        return json.loads(line)

    def close(self) -> None:
        """End the process (stdin closed: it leaves its loop) and wait for it."""
        with contextlib.suppress(OSError):  # the process may be gone
            self._stdin.close()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._errors.close()


def _interleaved_turn(
    checkouts: Mapping[str, Path],
    stores: Mapping[str, Path],
    chunks: int,
    queries: int,
    corpus: str,
) -> tuple[dict[str, dict], dict[str, dict[str, list[float]]]]:
    """One turn of both revisions, search by search: each side's p50s, and per-search ratios.

    Both processes are open at once and take the same query in turn (who goes first
    alternates), so the two searches of a pair meet the machine within milliseconds of
    each other: drift over seconds falls on both alike, which turns of a minute cannot
    promise on a machine with neighbours.
    """
    searchers: dict[str, _Searcher] = {}
    try:
        for side in ("before", "after"):
            searchers[side] = _Searcher(checkouts[side], stores[side], chunks, queries, corpus)
        p50s: dict[str, dict] = {"before": {}, "after": {}}
        ratios: dict[str, dict[str, list[float]]] = {}
        for depth in TURN_DEPTHS:
            figures: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
            for j in range(TURN_WARMUP + queries):
                order = ("before", "after") if j % 2 == 0 else ("after", "before")
                got = {side: searchers[side].search(j, depth) for side in order}
                if j < TURN_WARMUP:
                    continue
                for side in order:
                    for name, value in got[side].items():
                        figures[side].setdefault(name, []).append(value)
                for name, value in got["after"].items():
                    if got["before"].get(name, 0) > 0:
                        ratios.setdefault(str(depth), {}).setdefault(name, []).append(
                            value / got["before"][name]
                        )
            for side in figures:
                p50s[side][str(depth)] = {
                    name: statistics.median(values) for name, values in figures[side].items()
                }
        return p50s, ratios
    finally:
        for searcher in searchers.values():
            searcher.close()


def summarise(turns: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, dict]:
    """Per depth and figure: the median of the turns' p50s, and their lowest and highest."""
    out: dict[str, dict] = {}
    for depth in turns[0]:
        figures = turns[0][depth].keys()
        out[depth] = {
            name: {
                "median_ms": statistics.median(t[depth][name] for t in turns),
                "min_ms": min(t[depth][name] for t in turns),
                "max_ms": max(t[depth][name] for t in turns),
            }
            for name in figures
        }
    return out


def compare(before: Mapping[str, dict], after: Mapping[str, dict]) -> dict[str, dict]:
    """after / before of the medians, per depth and figure both have."""
    return {
        depth: {
            name: after[depth][name]["median_ms"] / before[depth][name]["median_ms"]
            for name in before[depth]
            if name in after.get(depth, {}) and before[depth][name]["median_ms"] > 0
        }
        for depth in before
    }


def paired(
    before: Sequence[Mapping[str, Mapping[str, float]]],
    after: Sequence[Mapping[str, Mapping[str, float]]],
) -> dict[str, dict]:
    """Per depth and figure: the median over turns of after / before within the same turn.

    Two turns of one round ran back to back, so their ratio cancels what the machine did
    over minutes; the median of those ratios is the steadiest single figure of the run.
    """
    out: dict[str, dict] = {}
    for depth in before[0]:
        names = [n for n in before[0][depth] if n in after[0].get(depth, {})]
        out[depth] = {
            name: statistics.median(
                a[depth][name] / b[depth][name]
                for b, a in zip(before, after, strict=True)
                if b[depth][name] > 0
            )
            for name in names
            if any(b[depth][name] > 0 for b in before)
        }
    return out


def markdown(report: Mapping) -> str:
    """The report as a table: p50 per revision (median of turns, with their range) and ratio."""
    b, a = report["before"]["commit"][:7], report["after"]["commit"][:7]
    per_search: Mapping[str, Mapping[str, float]] = report.get("per_search") or {}
    how = (
        "both revisions' processes open at once, taking each query in turn"
        if report.get("interleaved") == "search"
        else "one process per revision and turn, alternating"
    )
    lines = [
        f"# Search latency in turns: {b} -> {a}",
        "",
        f"{report['chunks']:,} {_CORPORA[report.get('corpus', 'synthetic')]}, embedded profile, "
        "limit 10, "
        f"{report['queries']} queries per turn, {report['turns']} turns ({how}), "
        f"query embedding excluded. p50 in ms: median of the turns (lowest-highest).",
        "",
        f"| depth | figure | {b} | {a} | after / before | paired |"
        + (" per search |" if per_search else ""),
        "|---|---|---|---|---|---|" + ("---|" if per_search else ""),
    ]
    for depth, figures in report["before"]["summary"].items():
        for name in SHOWN:
            if name not in figures or name not in report["after"]["summary"][depth]:
                continue
            cells = []
            for side in ("before", "after"):
                f = report[side]["summary"][depth][name]
                cells.append(f"{f['median_ms']:.1f} ({f['min_ms']:.1f}-{f['max_ms']:.1f})")
            # No ratio where the before median is 0 (`cpu native` when no Rust or ONNX
            # thread ran: a small store searched without Chroma's index, ADR 62).
            ratio = report["ratio"][depth].get(name)
            ratio_cell = "—" if ratio is None else f"{ratio:.3f}"
            pair = report["paired"][depth].get(name)
            pair_cell = "" if pair is None else f"{pair:.3f}"
            row = f"| {depth} | {name} | {cells[0]} | {cells[1]} | {ratio_cell} | {pair_cell} |"
            if per_search:
                searched = per_search.get(depth, {}).get(name)
                row += "" if searched is None else f" {searched:.3f} |"
            lines.append(row)
    lines += _build_lines(report, b, a)
    lines += [
        "",
        "after / before: of the medians. paired: the median over turns of after / before in "
        "the same turn. cpu: the process's CPU time per search, all threads; cpu loop, "
        "sqlite, executor, caller: the part spent by the client's event loop (the planner's "
        "Python), the SQLite connector's workers, the default executor's threads (Chroma, the "
        "graph), the calling thread (hydration); cpu native: the rest (Rust and ONNX "
        "threads). Each row is its own median, so the parts need not add up to cpu."
        + (
            " per search: the median over every query of every turn of after / before for "
            "that query, the two searched one right after the other."
            if per_search
            else ""
        ),
        "",
        f"Machine: {report['machine']}; load average before the turns "
        f"{report['load_before']:.2f}, after {report['load_after']:.2f}. "
        f"Measured {report['measured_at']}.",
    ]
    return "\n".join(lines) + "\n"


def _build_lines(report: Mapping, b: str, a: str) -> list[str]:
    """The write path: how long each revision took to fill its store (reports since it)."""
    built: Mapping[str, float] = report.get("build_s") or {}
    if set(built) != {"before", "after"}:
        return []
    rate = {side: report["chunks"] / seconds for side, seconds in built.items()}
    return [
        "",
        f"Filling the store through `client.ingest` (one revision after the other, before the "
        f"turns; no embedding cost): {b} {built['before']:.1f} s ({rate['before']:,.0f} "
        f"chunks/s), {a} {built['after']:.1f} s ({rate['after']:,.0f} chunks/s), after / "
        f"before {built['after'] / built['before']:.3f}.",
    ]


_CORPORA = {
    "synthetic": "synthetic chunks",
    "prose": "passages of real prose and code (one internal Document each, searched as "
    "internal, keyword and question queries in turn)",
}


def run(
    before: str,
    after: str,
    *,
    chunks: int,
    queries: int,
    turns: int,
    work: Path,
    by_search: bool = True,
    corpus: str = "synthetic",
    log=print,
) -> dict:
    """Check out, build and measure both revisions in turns; the report as a dict.

    `by_search`: each turn searches both revisions' processes alternately, search by
    search; otherwise each turn is one process per revision, one after the other.
    """
    commits = {"before": _git("rev-parse", before), "after": _git("rev-parse", after)}
    checkouts = {side: work / f"{side}-{sha[:10]}" for side, sha in commits.items()}
    stores = {side: work / f"store-{side}" for side in commits}
    measured: dict[str, list[dict]] = {"before": [], "after": []}
    build_s: dict[str, float] = {}
    searches: dict[str, dict[str, list[float]]] = {}  # per depth and figure: after / before
    try:
        for side, sha in commits.items():
            _git("worktree", "add", "--detach", "--force", str(checkouts[side]), sha)
            log(f"{side} {sha[:10]}: building {chunks:,} chunks")
            built = _turn(checkouts[side], "build", stores[side], chunks, queries, corpus)
            build_s[side] = built["build_s"]
            log(f"{side} {sha[:10]}: built in {built['build_s']:.0f} s")
        load_before = os.getloadavg()[0]
        for turn in range(1, turns + 1):
            if by_search:
                p50s, ratios = _interleaved_turn(checkouts, stores, chunks, queries, corpus)
                for side in commits:
                    measured[side].append(p50s[side])
                for depth, by_name in ratios.items():
                    for name, values in by_name.items():
                        searches.setdefault(depth, {}).setdefault(name, []).extend(values)
            else:
                for side in commits:
                    measured[side].append(
                        _turn(checkouts[side], "measure", stores[side], chunks, queries, corpus)
                    )
            log(
                f"turn {turn}/{turns}: depth-2 p50 before {measured['before'][-1]['2']['wall']:.1f}"
                f" ms, after {measured['after'][-1]['2']['wall']:.1f} ms"
            )
        load_after = os.getloadavg()[0]
    finally:
        for checkout in checkouts.values():
            if checkout.exists():
                _git("worktree", "remove", "--force", str(checkout))
    summaries = {side: summarise(measured[side]) for side in commits}
    return {
        "chunks": chunks,
        "corpus": corpus,
        "queries": queries,
        "turns": turns,
        "interleaved": "search" if by_search else "turn",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "load_before": load_before,
        "load_after": load_after,
        "build_s": build_s,
        **{
            side: {"commit": commits[side], "turns": measured[side], "summary": summaries[side]}
            for side in commits
        },
        "ratio": compare(summaries["before"], summaries["after"]),
        "paired": paired(measured["before"], measured["after"]),
        "per_search": {
            depth: {name: statistics.median(values) for name, values in by_name.items()}
            for depth, by_name in searches.items()
        },
    }


def _machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, write the report."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.revisions",
        description="Search latency of two git revisions on the synthetic corpus, measured "
        "on one machine with both revisions taking each query in turn, so that its drift "
        "falls on both alike.",
        epilog="example:\n  python -m benchmarks.revisions 501c2bc HEAD --chunks 100000 --turns 6",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("before", help="the revision to compare against (any git revision)")
    parser.add_argument("after", help="the revision measured against it (e.g. HEAD)")
    parser.add_argument("--chunks", type=int, default=100_000, help="corpus size (100000)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per turn (200)")
    parser.add_argument("--turns", type=int, default=6, help="turns per revision (6)")
    parser.add_argument(
        "--corpus",
        choices=sorted(_CORPORA),
        default="synthetic",
        help="synthetic (default; any revision since the scale suite) or prose: passages of "
        "real prose and code with full-length payloads (revisions since benchmarks.lexical_scale)",
    )
    parser.add_argument(
        "--by-turn",
        action="store_true",
        help="one process per revision and turn, one after the other (the first design); "
        "by default both revisions are open at once and take each query in turn",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"report folder ({DEFAULT_OUT.name}/)"
    )
    args = parser.parse_args(argv)
    for name in ("chunks", "queries", "turns"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="uda-revisions-") as tmp:
            report = run(
                args.before,
                args.after,
                chunks=args.chunks,
                queries=args.queries,
                turns=args.turns,
                work=Path(tmp),
                by_search=not args.by_turn,
                corpus=args.corpus,
                log=lambda m: print(f"[{time.perf_counter() - started:7.1f}s] {m}", flush=True),
            )
    except RevisionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{report['before']['commit'][:7]}..{report['after']['commit'][:7]}"
    if args.corpus != "synthetic":
        stem += f"-{args.corpus}"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (args.out / f"{stem}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
