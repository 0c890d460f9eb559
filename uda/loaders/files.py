"""Which files of a folder are loaded, what kind of text each is, and reading them safely.

Every file that is not loaded is reported as a `SkippedFile`: a stable `SkipReason` code that
scripts can count and filter on, and a detail for people (which byte, how big, which limit), so
that a caller can tell "skipped on purpose" from "lost". Excluded folders are reported once, not
file by file: a `node_modules` would otherwise flood the report.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1024 * 1024

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


class SkipReason(StrEnum):
    """Why a file or folder was not loaded: a stable code, for counts, scripts and filters.

    The values are printed by `uda ingest` and are part of its JSON output: add codes, but do
    not rename them.
    """

    BINARY = "binary"
    NOT_UTF8 = "not-utf8"
    EMPTY = "empty"
    SYMLINK = "symlink"
    TOO_BIG = "too-big"
    UNREADABLE = "unreadable"
    NOT_A_REGULAR_FILE = "not-a-regular-file"
    HIDDEN_FILE = "hidden-file"
    HIDDEN_FOLDER = "hidden-folder"
    EXCLUDED_FOLDER = "excluded-folder"
    VIRTUAL_ENVIRONMENT = "virtual-environment"
    NESTED_REPOSITORY = "nested-repository"
    IGNORED_BY_GIT = "ignored-by-git"
    UNSUPPORTED_TYPE = "unsupported-type"
    SOURCE_CODE = "source-code"
    INVALID_ELEMENT = "invalid-element"


@dataclass(frozen=True, order=True)
class SkippedFile:
    """A file or folder that was not loaded.

    Attributes:
        path: Relative POSIX path of the file, or of the folder whose files were all left out.
        reason: The stable code.
        detail: What exactly, for a person: e.g. "2,345,678 bytes > 1,048,576".
    """

    path: str
    reason: SkipReason
    detail: str

    def to_dict(self) -> dict[str, str]:
        """`{path, reason, detail}` as JSON-ready strings."""
        return {"path": self.path, "reason": self.reason.value, "detail": self.detail}


class SkipFileError(Exception):
    """A file is not loaded: `reason` and `detail` go to `LoadedSource.skipped`."""

    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail

    def skipped(self, path: str) -> SkippedFile:
        """The report entry of `path`, skipped for this error's reason."""
        return SkippedFile(path, self.reason, self.detail)


# A link may point outside the root (or at a secret); its target is loaded, if at all, under
# its own path.
_SYMLINK_DETAIL = (
    "symbolic links are never followed: a link may lead outside the folder (a target inside "
    "it is loaded under its own path)"
)


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Candidate files (relative POSIX paths, sorted) and what was left out while listing."""

    files: tuple[str, ...]
    skipped: tuple[SkippedFile, ...]


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


def refuse_symlink(path: Path) -> None:
    """Refuse a symbolic link, before anything reads or classifies what it points to.

    Raises:
        SkipFileError: `path` is a symbolic link.
    """
    if path.is_symlink():
        raise SkipFileError(SkipReason.SYMLINK, _SYMLINK_DETAIL)


def _excluded_folder(folder: str, absolute: Path) -> SkippedFile | None:
    """Why the files under `folder` (relative) are not the project's own, or None if they are."""
    name = PurePosixPath(folder).name
    if name.startswith("."):
        return SkippedFile(folder, SkipReason.HIDDEN_FOLDER, "its name starts with '.'")
    if name in _EXCLUDED_FOLDERS or name.endswith(".egg-info"):
        detail = f"{name!r} holds dependencies, caches or build metadata"
        return SkippedFile(folder, SkipReason.EXCLUDED_FOLDER, detail)
    # A virtual environment under any name carries a pyvenv.cfg; its files are not the project's.
    if (absolute / "pyvenv.cfg").is_file():
        detail = "it has a pyvenv.cfg: its files are installed packages"
        return SkippedFile(folder, SkipReason.VIRTUAL_ENVIRONMENT, detail)
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
    skipped: dict[str, SkippedFile] = {}
    verdicts: dict[str, SkippedFile | None] = {}
    for relative in sorted(set(relatives)):
        if relative.endswith("/"):
            # git lists an untracked repository inside the tree as a folder, not its files.
            folder = relative.rstrip("/")
            detail = "an untracked git repository inside this one: ingest it on its own"
            skipped.setdefault(folder, SkippedFile(folder, SkipReason.NESTED_REPOSITORY, detail))
            continue
        parts = PurePosixPath(relative).parts
        verdict: SkippedFile | None = None
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder not in verdicts:
                verdicts[folder] = _excluded_folder(folder, root / folder)
            verdict = verdicts[folder]
            if verdict is not None:
                skipped.setdefault(folder, verdict)
                break
        if verdict is None:
            kept.append(relative)
    return Listing(files=tuple(kept), skipped=tuple(sorted(skipped.values())))


def walk(root: Path) -> Listing:
    """Every file under `root` outside excluded folders, without following symbolic links."""
    files: list[str] = []
    skipped: list[SkippedFile] = []
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        base = here.relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        for name in sorted(dirnames):
            verdict = _folder_verdict(prefix + name, here / name)
            if verdict is not None:
                dirnames.remove(name)  # pruning in place stops os.walk from descending
                skipped.append(verdict)
        files.extend(prefix + name for name in filenames)
    return Listing(files=tuple(sorted(files)), skipped=tuple(sorted(skipped)))


def _folder_verdict(folder: str, absolute: Path) -> SkippedFile | None:
    # os.walk lists a link to a folder among the folders without entering it: reported here,
    # or it would vanish from the report.
    if absolute.is_symlink():
        return SkippedFile(folder, SkipReason.SYMLINK, _SYMLINK_DETAIL)
    return _excluded_folder(folder, absolute)


def read_text(root: Path, relative: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, decoded as UTF-8, with Windows and old Mac newlines made Unix ones.

    Args:
        root: The folder `relative` is in.
        relative: The file's relative POSIX path.
        max_bytes: Larger files are skipped as `too-big`.

    Raises:
        SkipFileError: The file is a symbolic link, not a regular file, over `max_bytes`,
            unreadable, binary (a NUL byte anywhere), not UTF-8, or blank.
    """
    path = root / relative
    refuse_symlink(path)
    try:
        if not path.is_file():
            raise SkipFileError(
                SkipReason.NOT_A_REGULAR_FILE, "a device, socket or pipe, not a regular file"
            )
        size = path.stat().st_size
        if size > max_bytes:
            raise SkipFileError(SkipReason.TOO_BIG, f"{size:,} bytes > {max_bytes:,}")
        data = path.read_bytes()
    except OSError as exc:
        raise SkipFileError(SkipReason.UNREADABLE, exc.strerror or type(exc).__name__) from exc
    return _decode(data)


def _decode(data: bytes) -> str:
    # The whole file is in memory: a NUL anywhere, not only near the start, makes it binary,
    # so that no text with a NUL reaches the stores.
    nul = data.find(b"\0")
    if nul >= 0:
        raise SkipFileError(SkipReason.BINARY, f"a NUL byte at offset {nul:,}")
    body = data.removeprefix(codecs.BOM_UTF8)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + len(data) - len(body)
        detail = f"byte 0x{data[offset]:02x} at offset {offset:,} is not UTF-8"
        raise SkipFileError(SkipReason.NOT_UTF8, detail) from exc
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise SkipFileError(SkipReason.EMPTY, "no text, only white space" if data else "0 bytes")
    return text
