"""Which files of a folder are loaded, what kind of text each is, and reading them safely.

Every file that is not loaded is reported with a reason, so that a caller can tell "skipped on
purpose" from "lost". Excluded folders are reported once, not file by file: a `node_modules`
would otherwise flood the report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1024 * 1024
BINARY_PROBE_BYTES = 8192

_MARKDOWN = frozenset({".md", ".markdown"})
_RST = frozenset({".rst"})
_TEXT = frozenset({".txt", ".text"})
_CODE = frozenset(
    {
        ".py", ".pyi", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rs", ".java",
        ".kt", ".kts", ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs",
        ".rb", ".php", ".swift", ".m", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".sql",
        ".toml", ".yaml", ".yml", ".json", ".ini", ".cfg", ".proto", ".graphql", ".lua",
        ".r", ".pl", ".ex", ".exs", ".erl", ".hs", ".clj", ".dart", ".vue", ".svelte",
        ".css", ".scss", ".html", ".xml", ".tf", ".gradle", ".cmake",
    }
)  # fmt: skip
# Extension-less files that are prose by convention (README, LICENSE ...) or code by name.
_PROSE_NAMES = frozenset(
    {
        "README", "LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS", "CONTRIBUTORS",
        "CONTRIBUTING", "CHANGELOG", "CHANGES", "HISTORY", "NEWS", "INSTALL", "SECURITY",
        "MAINTAINERS", "TODO", "CODEOWNERS",
    }
)  # fmt: skip
_CODE_NAMES = frozenset({"Makefile", "Dockerfile", "Containerfile", "Jenkinsfile", "Vagrantfile"})
_EXCLUDED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages"})


class FileKind(StrEnum):
    """How a file's text is read: which title syntax and front matter apply."""

    MARKDOWN = "markdown"
    RST = "rst"
    TEXT = "text"
    CODE = "code"


class SkipFileError(Exception):
    """A file is not loaded; `reason` says why (it goes to `LoadedSource.skipped`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Candidate files (relative POSIX paths, sorted) and what was left out while listing."""

    files: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def file_kind(relative: str) -> FileKind | None:
    """The kind of text a file holds, by its name; None when it is not a text type UDA loads."""
    path = PurePosixPath(relative)
    suffix = path.suffix.lower()
    if suffix in _MARKDOWN:
        return FileKind.MARKDOWN
    if suffix in _RST:
        return FileKind.RST
    if suffix in _TEXT:
        return FileKind.TEXT
    if suffix in _CODE:
        return FileKind.CODE
    if not suffix and path.name.upper() in _PROSE_NAMES:
        return FileKind.TEXT
    if path.name in _CODE_NAMES:
        return FileKind.CODE
    return None


def _excluded_folder(name: str, absolute: Path | None = None) -> str | None:
    if name.startswith("."):
        return "hidden folder"
    if name in _EXCLUDED_FOLDERS or name.endswith(".egg-info"):
        return "excluded folder"
    # A virtual environment under any name carries a pyvenv.cfg; its files are not the project's.
    if absolute is not None and (absolute / "pyvenv.cfg").is_file():
        return "virtual environment"
    return None


def filter_listing(root: Path, relatives: list[str]) -> Listing:
    """Drop files inside excluded folders from a listing (e.g. from `git ls-files`).

    Args:
        root: The folder the paths are relative to.
        relatives: Relative POSIX paths.

    Returns:
        The remaining files, sorted, and each excluded folder once with its reason.
    """
    kept: list[str] = []
    skipped: dict[str, str] = {}
    verdicts: dict[str, str | None] = {}
    for relative in sorted(set(relatives)):
        if relative.endswith("/"):
            # git lists an untracked repository inside the tree as a folder, not its files.
            skipped.setdefault(relative.rstrip("/"), "nested git repository")
            continue
        parts = PurePosixPath(relative).parts
        reason: str | None = None
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder not in verdicts:
                verdicts[folder] = _excluded_folder(parts[depth - 1], root / folder)
            reason = verdicts[folder]
            if reason is not None:
                skipped.setdefault(folder, reason)
                break
        if reason is None:
            kept.append(relative)
    return Listing(files=tuple(kept), skipped=tuple(sorted(skipped.items())))


def walk(root: Path) -> Listing:
    """Every file under `root` outside excluded folders, without following symbolic links."""
    files: list[str] = []
    skipped: list[tuple[str, str]] = []
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        base = here.relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        for name in sorted(dirnames):
            reason = _excluded_folder(name, here / name)
            if reason is not None:
                dirnames.remove(name)  # pruning in place stops os.walk from descending
                skipped.append((prefix + name, reason))
        files.extend(prefix + name for name in filenames)
    return Listing(files=tuple(sorted(files)), skipped=tuple(sorted(skipped)))


def read_text(root: Path, relative: str) -> str:
    """The file's text, decoded as UTF-8, with Windows and old Mac newlines made Unix ones.

    Raises:
        SkipFileError: The file is a symbolic link, not a regular file, over `MAX_FILE_BYTES`,
            binary, not UTF-8, unreadable, or blank.
    """
    path = root / relative
    # A link may point outside the root (or at a secret); its target is loaded, if at all,
    # under its own path.
    if path.is_symlink():
        raise SkipFileError("symbolic link")
    try:
        if not path.is_file():
            raise SkipFileError("not a regular file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SkipFileError(f"too big ({size} bytes > {MAX_FILE_BYTES})")
        data = path.read_bytes()
    except OSError as exc:
        raise SkipFileError(f"unreadable ({exc.strerror or type(exc).__name__})") from exc
    if b"\0" in data[:BINARY_PROBE_BYTES]:
        raise SkipFileError("binary")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkipFileError("not UTF-8") from exc
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise SkipFileError("empty")
    return text
