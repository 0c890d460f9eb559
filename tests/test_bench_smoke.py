"""The benchmark harness end to end, at its smallest preset, so that it cannot rot.

Runs `python -m benchmarks --preset smoke` (both profiles: the servers are started and
stopped by the run) in a subprocess, as `make bench` would, and checks the report: files,
keys, a figure in every row, quality metrics within [0, 1], targets judged from the rows.
The figures themselves are not asserted: on tiny sizes and a busy machine they mean nothing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.datasets import DEFAULT_DATA, PROJECT_ROOT
from benchmarks.presets import SUITES

QUALITY_PREFIXES = ("ndcg@", "recall@", "recall", "mrr", "precision", "filter_exact", "reachable")
MACHINE_KEYS = {"cpu_model", "cpu_count", "ram_bytes", "python", "packages", "git_commit"}
REPORT_KEYS = {
    "schema_version",
    "preset",
    "preset_settings",
    "profiles",
    "started_at",
    "finished_at",
    "wall_s",
    "machine",
    "suites",
    "targets",
    "files",
}
ROW_KEYS = {"suite", "dataset", "system", "method", "profile", "metrics", "params"}


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--preset",
            "smoke",
            "--out",
            str(out),
            "--vector-cache",
            str(out / "cache" / "vectors.sqlite"),
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out, json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_smoke_run_writes_every_file(smoke_report: tuple[Path, dict[str, Any]]) -> None:
    out, _ = smoke_report
    # Without the evaluation data (a clone not beside ../shared/data) there is no quality
    # figure to plot; the report then says "not measured" (checked below).
    names = ["report.json", "summary.md", "latency_vs_size.png"]
    names += ["quality.png"] if DEFAULT_DATA.is_dir() else []
    for name in names:
        assert (out / name).stat().st_size > 0, name
    assert (out / "latency_vs_size.png").read_bytes()[:4] == b"\x89PNG"
    summary = (out / "summary.md").read_text()
    assert "## Targets" in summary
    assert all(f"## {suite}" in summary for suite in SUITES)


@pytest.mark.slow
def test_smoke_report_has_the_expected_keys(smoke_report: tuple[Path, dict[str, Any]]) -> None:
    _, report = smoke_report
    assert report.keys() >= REPORT_KEYS
    assert report["preset"] == "smoke"
    assert report["machine"].keys() >= MACHINE_KEYS
    assert report["machine"]["cpu_count"] >= 1
    assert report["machine"]["packages"]["txtai"]
    assert set(report["suites"]) == set(SUITES)
    for target in report["targets"]:
        assert target.keys() >= {"id", "target", "figure", "met", "status", "detail"}
        assert target["status"] in {"met", "missed", "not measured"}
        if target["met"] is not None:
            assert isinstance(target["figure"], float | int)


@pytest.mark.slow
def test_every_suite_ran_and_every_row_has_figures(
    smoke_report: tuple[Path, dict[str, Any]],
) -> None:
    _, report = smoke_report
    have_data = DEFAULT_DATA.is_dir()
    for name, suite in report["suites"].items():
        if name == "scale" or have_data:
            assert suite["status"] == "ok", (name, suite.get("reason"), suite["notes"])
            assert suite["rows"], name
        for row in suite["rows"]:
            assert row.keys() >= ROW_KEYS
            assert row["metrics"], row
            for key, value in row["metrics"].items():
                assert isinstance(value, float), (row["method"], key)
                assert math.isfinite(value), (row["method"], key)
                if key.startswith(QUALITY_PREFIXES) and not key.endswith("_points"):
                    assert 0.0 <= value <= 1.0, (row["dataset"], row["method"], key, value)
    systems = {(r["suite"], r["system"]) for s in report["suites"].values() for r in s["rows"]}
    assert {("scale", s) for s in ("uda", "siloed", "floor", "txtai")} <= systems
    profiles = {r["profile"] for r in report["suites"]["scale"]["rows"]}
    assert {"embedded", "server"} <= profiles
    if have_data:
        assert {("scifact", s) for s in ("uda", "floor", "txtai")} <= systems
        leaks = [r for r in report["suites"]["keps"]["rows"] if r["method"] == "clearance"]
        assert leaks
        assert all(r["metrics"]["leaks"] == 0 for r in leaks)
    # What an answer cost the service's processes is measured, not left at zero.
    for row in report["suites"]["service"]["rows"] if have_data else ():
        assert row["metrics"]["cpu_ms_per_answer"] > 0, row["method"]
        assert 0 < row["metrics"]["cpu_cores"] <= (os.cpu_count() or 1) * 1.1, row["method"]
    # A backend stopped, paused or restarted under load: no leak, nothing acknowledged lost.
    for row in report["suites"]["resilience"]["rows"]:
        assert row["metrics"]["leaks"] == 0, row["method"]
        assert row["metrics"]["lost"] == 0, row["method"]
        assert row["metrics"]["check_clean"] == 1, row["method"]
