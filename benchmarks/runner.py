"""One run: pick the suites, give them a temporary work folder and servers, write the report.

Stores live in a temporary folder that is deleted at the end; the servers of the server
profile are started on first use and stopped in a `finally`, whatever happens. A suite that
fails is recorded as failed, with its traceback, and the run goes on.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.presets import PRESETS, SUITES, Preset
from benchmarks.suites import Context, Suite, SuiteResult
from benchmarks.systems import Servers


def _suite(name: str) -> Suite:
    # Imported on demand: a run of one suite does not import the others' dependencies.
    if name == "scifact":
        from benchmarks.suites import scifact

        return scifact.run
    if name == "multihop":
        from benchmarks.suites import multihop

        return multihop.run
    if name == "keps":
        from benchmarks.suites import keps_suite

        return keps_suite.run
    if name == "scale":
        from benchmarks.suites import scale

        return scale.run
    if name == "ingest":
        from benchmarks.suites import ingest

        return ingest.run
    if name == "structured":
        from benchmarks.suites import structured

        return structured.run
    if name == "resilience":
        from benchmarks.suites import resilience

        return resilience.run
    if name == "service":
        from benchmarks.suites import service

        return service.run
    if name == "replicas":
        from benchmarks.suites import replicas

        return replicas.run
    if name == "cluster":
        from benchmarks.suites import cluster

        return cluster.run
    if name == "partitions":
        from benchmarks.suites import partitions

        return partitions.run
    if name == "answers":
        from benchmarks.suites import answers

        return answers.run
    raise ValueError(f"unknown suite {name!r}")


def run(
    *,
    preset: Preset,
    suites: Sequence[str] = SUITES,
    profiles: Sequence[str] = ("embedded", "server"),
    out: Path,
    data: Path,
    readmes: Sequence[Path] = (),
    skipped_sizes: Sequence[int] = (),
    vector_cache: Path | None = None,
    merge: bool = False,
) -> dict[str, Any]:
    """Run the suites of a preset and write the report under `out`; returns the report.

    With `merge`, the suites of the report already in `out` that this run does not run are
    kept, each with the run it came from (`report.merge_previous`).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started_at = report.now_iso()
    started = time.perf_counter()
    machine = report.machine_info()
    results: dict[str, SuiteResult] = {}
    runs: dict[str, dict[str, Any]] = {}
    previous = report.previous(out, preset.name) if merge else None
    with tempfile.TemporaryDirectory(prefix="uda-bench-") as work_dir:
        work = Path(work_dir)
        servers = Servers(work / "servers")
        ctx = Context(
            preset=preset,
            data=data,
            work=work,
            servers=servers,
            profiles=tuple(profiles),
            vector_cache=vector_cache,
        )
        try:
            for name in suites:
                result = SuiteResult(name=name)
                results[name] = result
                ctx.log(f"== {name} ({preset.name})")
                runs[name] = report.suite_run(machine)
                begun = time.perf_counter()
                try:
                    _suite(name)(ctx, result)
                except Exception as exc:  # a failed suite is reported, the run goes on
                    result.status = "failed"
                    result.reason = f"{type(exc).__name__}: {exc}"
                    result.notes.append(traceback.format_exc(limit=8))
                    ctx.log(f"{name} FAILED: {result.reason}")
                result.wall_s = time.perf_counter() - begun
                if name == "scale" and skipped_sizes:
                    result.notes.append(
                        "not run (skipped by flag): "
                        + ", ".join(f"{s:,} chunks" for s in skipped_sizes)
                    )
        finally:
            servers.close()
            ctx.close()
        if servers.start_seconds is not None:
            machine["server_start_s"] = servers.start_seconds
        embedding = ctx.embedding_stats()
    try:
        load_end = list(os.getloadavg())
    except OSError:
        load_end = None
    payload: dict[str, Any] = {
        "schema_version": report.SCHEMA_VERSION,
        "preset": preset.name,
        "preset_settings": _settings(preset),
        "suites_requested": list(suites),
        "profiles": list(profiles),
        "started_at": started_at,
        "finished_at": report.now_iso(),
        "wall_s": time.perf_counter() - started,
        "machine": machine,
        "load_average_at_end": load_end,
        "document_embeddings": embedding,
        "suites": {name: {**r.to_dict(), "run": runs[name]} for name, r in results.items()},
    }
    if previous is not None:
        report.merge_previous(payload, previous, order=SUITES)
    return report.write(out, payload, readmes)


def _settings(preset: Preset) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(preset)


__all__ = ["PRESETS", "SUITES", "run"]
