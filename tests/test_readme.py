"""Every code block in the README runs as written.

Python blocks are executed; shell blocks run their `uda ...` commands through the real
command line against a fresh store, from the project root. The `make` commands are what CI
itself runs, so they are covered by CI rather than re-entered here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from uda.cli.commands import EXIT_OK, main
from uda.embedding import Embedder

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text()
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.DOTALL)
SHELL_BLOCKS = re.findall(r"```sh\n(.*?)```", TEXT, flags=re.DOTALL)
CONSOLE_BLOCKS = re.findall(r"```console\n(.*?)```", TEXT, flags=re.DOTALL)


def test_readme_has_code_blocks() -> None:
    assert len(PYTHON_BLOCKS) >= 2
    assert len(SHELL_BLOCKS) >= 2


@pytest.mark.parametrize("source", PYTHON_BLOCKS, ids=[f"py{i}" for i in range(len(PYTHON_BLOCKS))])
def test_readme_python_block_runs(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(source, str(README), "exec"), {"__name__": "__readme__"})  # noqa: S102


def _commands(block: str) -> list[list[str]]:
    commands: list[list[str]] = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        for part in line.split("&&"):
            words = shlex.split(part)
            if words:
                commands.append(words)
    return commands


def test_readme_shell_commands_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Embedder
) -> None:
    monkeypatch.chdir(ROOT)
    ran = 0
    for block in SHELL_BLOCKS:
        for words in _commands(block):
            if words[0] == "make":
                assert words[1] in {"demo", "test"}  # what CI and the user run
                continue
            assert words[0] == "uda", f"unexpected command in README: {words}"
            assert main(["--path", str(tmp_path / "store"), *words[1:]]) == EXIT_OK, words
            ran += 1
    assert ran >= 6


def test_readme_console_sessions_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Embedder
) -> None:
    """`$ .venv/bin/uda ...` lines run in order from a scratch project (they start servers)."""
    assert CONSOLE_BLOCKS
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "README.md").write_text("# Scratch\n\nStores are repaired by `uda sync`.\n")
    monkeypatch.chdir(project)
    ran = 0
    try:
        for block in CONSOLE_BLOCKS:
            for line in block.splitlines():
                if not line.startswith("$ "):
                    continue
                words = shlex.split(line[2:].split("#", 1)[0])
                assert words[0] == ".venv/bin/uda", f"unexpected command in README: {words}"
                assert main(words[1:]) == EXIT_OK, words
                ran += 1
    finally:
        # Never leave servers (or their data) behind, even when a line failed.
        main(["services", "down", "--purge"])
    assert ran >= 5
