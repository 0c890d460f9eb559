"""The suites of a run, and what they share: the run's context, rows and results.

A row is one measured thing: a suite, a dataset, a system (`uda`, `floor`, `siloed`,
`txtai`, `model`), a method (which legs, which depth), a profile where it applies, its
`metrics` (numbers only) and its `params` (how it was configured).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.embedding import CachingEmbedder, VectorCache, model_fingerprint
from benchmarks.presets import Preset
from benchmarks.systems import Servers


@dataclass(kw_only=True)
class Context:
    """What every suite of one run shares."""

    preset: Preset
    data: Path
    work: Path
    servers: Servers
    profiles: tuple[str, ...]
    # Where corpus vectors are kept between runs (None: embed everything every run).
    vector_cache: Path | None = None
    started: float = field(default_factory=time.perf_counter)
    _embedder: CachingEmbedder | None = None
    _disk: VectorCache | None = None

    @property
    def embedder(self) -> CachingEmbedder:
        """The packaged MiniLM behind a text cache in memory and, if asked, on disk."""
        if self._embedder is None:
            embedder = CachingEmbedder()
            if self.vector_cache is not None:
                folder = Path(embedder.inner.model_path)
                self._disk = VectorCache(
                    self.vector_cache, model_fingerprint(folder), embedder.dimension
                )
                embedder = CachingEmbedder(embedder.inner, disk=self._disk)
            embedder.embed_query("warm up")
            self._embedder = embedder
        return self._embedder

    def embedding_stats(self) -> dict[str, float | str | None] | None:
        """How many document texts the model embedded for the run, in how long, and how
        many vectors came from the on-disk cache instead."""
        if self._embedder is None:
            return None
        return {
            "texts": float(self._embedder.embedded),
            "seconds": self._embedder.seconds,
            "from_disk_cache": float(self._embedder.from_disk),
            "disk_cache": None if self._disk is None else self._disk.path.name,
        }

    def close(self) -> None:
        """Release the on-disk cache."""
        if self._disk is not None:
            self._disk.close()

    def quality_profiles(self) -> list[str]:
        """Profiles the quality suites run on: the preset's, narrowed by `--profiles`."""
        return [p for p in self.preset.quality_profiles if p in self.profiles]

    def log(self, message: str) -> None:
        """Progress on stderr, with the run's elapsed time."""
        elapsed = time.perf_counter() - self.started
        print(f"[{elapsed:7.1f}s] {message}", file=sys.stderr, flush=True)


@dataclass(kw_only=True)
class SuiteResult:
    """What a suite produced: rows, a status, and notes on what did or did not run."""

    name: str
    status: str = "ok"  # ok | skipped | failed
    reason: str | None = None
    wall_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    notes: list[str] = field(default_factory=list[str])

    def add(
        self,
        *,
        dataset: str,
        system: str,
        method: str,
        metrics: dict[str, float],
        profile: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append a row (metrics must be numbers)."""
        row = {
            "suite": self.name,
            "dataset": dataset,
            "system": system,
            "method": method,
            "profile": profile,
            "metrics": {k: float(v) for k, v in metrics.items()},
            "params": params or {},
        }
        self.rows.append(row)
        return row

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the JSON report."""
        return {
            "status": self.status,
            "reason": self.reason,
            "wall_s": self.wall_s,
            "rows": self.rows,
            "notes": self.notes,
        }


Suite = Callable[[Context, SuiteResult], None]
