"""The JVM the embedded engine runs in: started once per process, and kept from stalling it.

JPype ties the JVM's garbage collector to Python's, and each tie stops every Python thread
for as long as a full collection takes (docs/adr/0057-the-jvm-leaves-pythons-collector-alone.md):

- each Java collection, young ones included, makes JPype run a *full* Python collection,
  holding the GIL: half a second in a process of a million Python objects;
- a Python collection after the process's allocations grew by 20 MB makes it call
  `System.gc()`, a full Java collection, from inside Python's collector, GIL held again.

Under load the JVM collects several times a second, so a process hosting the engine froze
its event loop and every worker thread for seconds: a search on SQLite, which has nothing to
do with the JVM, missed its deadline. Each collector alone is enough here: UDA gives Java no
Python object to hold (no proxies), so no reference cycle crosses the two heaps.
"""

from __future__ import annotations

import gc
import importlib
import os
import threading
from pathlib import Path
from typing import Any

DEFAULT_HEAP = "1g"

# Quiet console, no log files in the caller's working directory (ArcadeDB's default is a
# FileHandler writing ./log/arcadedb.log wherever the process happens to run).
_LOGGING = """\
handlers = java.util.logging.ConsoleHandler
.level = WARNING
com.arcadedb.level = WARNING
com.arcadedb.query.polyglot.level = SEVERE
java.util.logging.ConsoleHandler.level = WARNING
java.util.logging.ConsoleHandler.formatter = com.arcadedb.log.LogFormatter
"""
_JVM_LOCK = threading.Lock()


def start_jvm(home: Path, heap: str = DEFAULT_HEAP) -> None:
    """Start the JVM once per process: heap capped, logging kept out of the working folder.

    `ARCADEDB_JVM_ARGS` wins where it sets `-Xmx` or a logging configuration itself. A JVM
    that is already running (another connector, another library) is joined as it is, its
    garbage collection left as its owner set it.
    """
    jpype: Any = importlib.import_module("jpype")
    jvm: Any = importlib.import_module("arcadedb_embedded.jvm")
    with _JVM_LOCK:
        if jpype.isJVMStarted():
            return
        configured = os.environ.get("ARCADEDB_JVM_ARGS", "")
        args: list[str] = []
        if "-Xmx" not in configured:
            args.append(f"-Xmx{heap}")
        if "java.util.logging.config.file" not in configured:
            home.mkdir(parents=True, exist_ok=True)
            logging_file = home / "arcadedb-log.properties"
            logging_file.write_text(_LOGGING)
            args.append(f"-Djava.util.logging.config.file={logging_file}")
        failures: list[BaseException] = []

        def boot() -> None:
            # JNI attaches the thread that creates the JVM as a non-daemon thread, and the
            # JVM's shutdown at exit waits for every such thread: a worker or event-loop
            # thread that started it and then ended would hang the interpreter's exit. So a
            # thread of its own starts the JVM and detaches before it ends.
            try:
                jvm.start_jvm(jvm_args=args)
                jpype.JClass("java.lang.Thread").detach()
            except BaseException as exc:
                failures.append(exc)

        starter = threading.Thread(target=boot, name="arcadedb-jvm-start", daemon=True)
        starter.start()
        starter.join()
        if failures:
            raise failures[0]
        untie_garbage_collectors()


def untie_garbage_collectors() -> None:
    """Let the JVM and Python collect their garbage each on its own (see the module's doc).

    JPype's tie is its callback in `gc.callbacks`. Removed, Python's collections no longer
    run Java's. Java's run Python's only while JPype's callback has not seen a collection
    start: it sets that mark at each "start" and clears it at each "stop", and it will see
    no "stop" again once removed, so one "start" given now keeps the mark set for good.
    """
    native: Any = importlib.import_module("_jpype")
    tie = native._collect
    # JPype adds it twice (once per stage of its start), so every copy goes.
    gc.callbacks[:] = [callback for callback in gc.callbacks if callback != tie]
    tie("start", {})
