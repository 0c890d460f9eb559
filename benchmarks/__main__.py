"""`python -m benchmarks`: run the benchmark harness and write its report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Before anything loads torch or Faiss: with spinning OpenMP threads, the model (torch) and
# txtai's Faiss slow each other down 2x when they share a process on few cores; every system
# of the run gets the same setting.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from benchmarks.datasets import DEFAULT_DATA, PROJECT_ROOT
from benchmarks.presets import SUITES

EPILOG = """\
examples:
  python -m benchmarks --preset smoke                  # ~3 min: the harness end to end
  python -m benchmarks --preset quick                  # 1 h+: full public sets, 10k chunks
  python -m benchmarks --preset full                   # hours: adds 100k and 1M chunks
  python -m benchmarks --preset full --skip-1m         # full without the 1M-chunk point
  python -m benchmarks --only scifact,multihop --profiles embedded
  python -m benchmarks --preset quick --only scale --out scale-report
  python -m benchmarks --preset full --only scifact,multihop --merge
                                                       # add suites to the full report

suites:
  scifact   nDCG@10, Recall@100: BM25, dense, dense+lexical, full pipeline; floor; txtai
  multihop  Recall@2/@5: BM25, dense, dense+graph (degree), dense+PPR, on a data-derived graph
  keps      KEPs as decisions/documents/SIGs/people: metadata questions, clearance leaks
  scale     synthetic ontology: latency per phase, throughput, siloed / floor / txtai ratios
  ingest    ingest throughput against the raw embedding throughput of the same model
  structured  lists without a query (relation path + date range) and deep pages, by cursor
  resilience  uda serve under 16 clients while ArcadeDB or PostgreSQL is stopped and restarted
  service   uda serve on SciFact under 1, 8 and 32 loopback clients: QPS, p99, memory, workers
  answers   200 KB documents: bytes of the default answer and of fields=["*"] (JSON, Arrow, HTTP)

output (under --out, default benchmarks/results/<preset>/):
  report.json         every figure, the targets, the machine and package versions
  summary.md          the tables and where each target stands
  latency_vs_size.png quality.png
Timings are only as good as the machine is quiet: the report records the load average.
"""


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="UDA benchmark harness: quality on public data (SciFact, multi-hop sets, "
        "KEPs) and speed on a synthetic ontology, with baselines in the same run "
        "(numpy floor, siloed client, txtai).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        choices=("smoke", "quick", "full"),
        default="quick",
        help="how much to run: smoke (minutes, tiny), quick (default; full public sets, "
        "10k chunks), full (adds 100k and 1M chunks, server profile for quality)",
    )
    parser.add_argument(
        "--only",
        default="",
        metavar="SUITES",
        help="comma-separated subset of: " + ",".join(SUITES) + " (default: all)",
    )
    parser.add_argument(
        "--profiles",
        default="embedded,server",
        metavar="PROFILES",
        help="comma-separated UDA profiles: embedded (Chroma, networkx, SQLite) and/or server "
        "(PostgreSQL+pgvector and ArcadeDB, started and stopped by the run); default both",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the report goes (default: benchmarks/results/<preset>/)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="the evaluation data (default: ../shared/data from the project root, or "
        "$UDA_BENCH_DATA)",
    )
    parser.add_argument(
        "--skip-1m",
        action="store_true",
        help="leave out the 1M-chunk scale point (recorded as not run in the report)",
    )
    parser.add_argument(
        "--max-chunks",
        type=int,
        default=None,
        metavar="N",
        help="leave out every scale point above N chunks (recorded as not run)",
    )
    parser.add_argument(
        "--readme",
        type=Path,
        action="append",
        default=None,
        metavar="FILE",
        help="write the summary table between the '<!-- bench:summary:begin -->' and "
        "'<!-- bench:summary:end -->' markers of FILE (repeatable; default for --preset full: "
        "README.md and benchmarks/README.md, each only if it has the markers)",
    )
    parser.add_argument(
        "--publish",
        type=Path,
        default=None,
        metavar="REPORT",
        help="run nothing: judge the targets of an existing report.json again on its rows "
        "(a target added since the run shows), rewrite its summary.md, write the summary "
        "table into the READMEs (--readme, default README.md and benchmarks/README.md) and "
        "exit",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the suites of the report already in --out that this run does not run "
        "(same preset only); each suite records the run (date, commit) it came from, so a "
        "long preset can be completed suite by suite",
    )
    parser.add_argument(
        "--vector-cache",
        type=Path,
        default=PROJECT_ROOT / "benchmarks" / "results" / "cache" / "vectors.sqlite",
        metavar="FILE",
        help="keep corpus vectors in FILE between runs, keyed by the model's fingerprint and "
        "the text, so a rerun skips the corpus embedding (default: "
        "benchmarks/results/cache/vectors.sqlite); the ingest suite's throughput figures "
        "never use it",
    )
    parser.add_argument(
        "--no-vector-cache",
        action="store_true",
        help="embed every corpus text with the model, as a first run does",
    )
    args = parser.parse_args(argv)

    if args.publish is not None:
        from benchmarks.report import publish

        if not args.publish.is_file():
            parser.error(f"--publish: no report at {args.publish}")
        targets = args.readme or [
            PROJECT_ROOT / "README.md",
            PROJECT_ROOT / "benchmarks" / "README.md",
        ]
        updated = publish(args.publish, targets)
        print(f"updated: {', '.join(str(p) for p in updated) or 'nothing (no markers)'}")
        return 0

    from benchmarks.presets import PRESETS

    suites = [s.strip() for s in args.only.split(",") if s.strip()] or list(SUITES)
    unknown = sorted(set(suites) - set(SUITES))
    if unknown:
        parser.error(f"--only: unknown suite(s) {', '.join(unknown)}; use {','.join(SUITES)}")
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    if not profiles or set(profiles) - {"embedded", "server"}:
        parser.error("--profiles: use embedded, server or embedded,server")
    preset = PRESETS[args.preset]
    limit = args.max_chunks
    if args.skip_1m:
        limit = min(limit or 999_999, 999_999)
    skipped: list[int] = []
    if limit is not None:
        skipped = [s for s in preset.scale_sizes if s > limit]
        preset = preset.without_sizes_above(limit)
    data = args.data or Path(os.environ.get("UDA_BENCH_DATA") or DEFAULT_DATA)
    out = args.out or PROJECT_ROOT / "benchmarks" / "results" / preset.name
    readmes: list[Path] = args.readme or []
    if args.readme is None and preset.name == "full":
        readmes = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "benchmarks" / "README.md"]

    from benchmarks.report import MergeError, previous
    from benchmarks.runner import run

    if args.merge:
        try:
            previous(out, preset.name)  # refuse before hours of work, not after
        except MergeError as exc:
            parser.error(str(exc))
    report = run(
        preset=preset,
        suites=suites,
        profiles=profiles,
        out=out,
        data=data,
        readmes=readmes,
        skipped_sizes=skipped,
        vector_cache=None if args.no_vector_cache else args.vector_cache,
        merge=args.merge,
    )
    failed = [n for n, s in report["suites"].items() if s["status"] == "failed"]
    print(f"report: {out / 'summary.md'}", file=sys.stderr)
    for target in report["targets"]:
        figure = "—" if target["figure"] is None else f"{target['figure']:.4g}"
        print(f"  {target['status']:>12}  {target['id']}: {figure}", file=sys.stderr)
    if failed:
        print(f"failed suites: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
