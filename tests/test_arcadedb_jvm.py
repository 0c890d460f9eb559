"""The embedded engine's JVM and Python collect their garbage each on its own (ADR 57).

JPype ran a full Python collection for every Java one and a full Java collection from inside
Python's, each holding the GIL: in a process of a million Python objects every Java collection
froze every thread for half a second, and searches on SQLite missed their deadlines.

Each case runs in a fresh interpreter, where the JVM starts the way the connector starts it
(a JVM starts once per process, and this one's may already be running).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("arcadedb_embedded")

ROOT = Path(__file__).resolve().parents[1]

# Counts Python's full collections while Java collects, and the Java collections JPype runs
# while Python collects after its allocations grew by far more than JPype's 20 MB threshold.
PROBE = """
import gc, json, sys, time
from pathlib import Path

import _jpype
import jpype
from connectors.arcadedb.jvm import start_jvm

start_jvm(Path(sys.argv[1]))
python_full = []
gc.callbacks.append(
    lambda phase, info: python_full.append(1) if phase == "stop" and info["generation"] == 2
    else None
)
System = jpype.JClass("java.lang.System")

def java_collections_python_ran():  # JPype's own count of its System.gc() calls
    return _jpype.gcStats()["triggered"]

for _ in range(5):
    System.gc()
    time.sleep(0.3)  # JPype's reference thread wakes within 250 ms of a Java collection
from_java = len(python_full)

grown = [str(i) * 8 for i in range(1_000_000)]  # ~60 MB of small allocations
before = java_collections_python_ran()
for _ in range(3):
    grown.append([str(i) for i in range(200_000)])
    gc.collect()
print(json.dumps({"python_full_from_java": from_java,
                  "java_from_python": java_collections_python_ran() - before}))
"""


def test_java_and_python_collections_do_not_run_each_other(tmp_path: Path) -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, our own probe
        [sys.executable, "-c", PROBE, str(tmp_path / "jvm")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts == {"python_full_from_java": 0, "java_from_python": 0}
