"""What git knows about a folder: its remote, its file list, and who touched which file when.

The history comes from ONE streamed `git log` over the whole history, never one process per
file: on a repository with thousands of files that is the difference between a second and
minutes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

_GIT_TIMEOUT_S = 60
_COMMIT = "\x1e"  # starts a commit header in the log stream
_FIELD = "\x1f"
# %aN/%aE apply .mailmap, so one person with two addresses can be merged by the project.
_LOG_FORMAT = "%x1e%aN%x1f%aE%x1f%ct"  # the same separators, as git placeholders


@dataclass(frozen=True, kw_only=True)
class Author:
    """A commit author, identified by the lowercased email."""

    name: str
    email: str


@dataclass(kw_only=True)
class FileHistory:
    """Authors of the commits that touched a file, and the newest committer time among them."""

    emails: set[str] = field(default_factory=set[str])
    last_commit: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class History:
    """Per-file history (paths relative to the loaded folder) and every author seen."""

    files: dict[str, FileHistory]
    authors: dict[str, Author]  # by email; the name is the one of the newest commit
    last_commit: dict[str, datetime]  # by email: the author's newest commit time


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(  # noqa: S603 - fixed git arguments, no shell
            ["git", "-c", "core.quotepath=off", *args],  # noqa: S607 - git from PATH
            cwd=root,
            capture_output=True,
            check=False,
            timeout=_GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return os.fsdecode(done.stdout)


@dataclass(frozen=True, kw_only=True)
class WorkTree:
    """Where a loaded folder sits in its git working tree."""

    top: Path
    prefix: str  # the folder relative to `top`, "" or ending in "/"


def work_tree(root: Path) -> WorkTree | None:
    """The git working tree holding `root`.

    None when git is missing, `root` is not in a repository, or git refuses to read it (a
    folder owned by another user, say): the folder is then walked like any other.
    """
    out = _git(root, "rev-parse", "--is-inside-work-tree", "--show-toplevel", "--show-prefix")
    lines = (out or "").split("\n")
    if len(lines) < 3 or lines[0] != "true":
        return None
    return WorkTree(top=Path(lines[1]), prefix=lines[2])


def remote_url(root: Path) -> str | None:
    """The URL of the `origin` remote without any credentials in it, or None."""
    url = (_git(root, "remote", "get-url", "origin") or "").strip()
    if not url:
        return None
    if "://" in url:
        # A token in https://user:token@host/... must not end up in a searchable store.
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def name_from_url(url: str) -> str | None:
    """The repository name in a remote URL: its last path component without `.git`."""
    last = url.rstrip("/").replace(":", "/").rsplit("/", 1)[-1]
    name = last.removesuffix(".git")
    return name or None


def list_files(root: Path) -> list[str] | None:
    """Tracked and untracked files under `root` that `.gitignore` does not exclude.

    Paths are relative to `root` (git prints them so when run from a subfolder); None when
    git fails.
    """
    out = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if out is None:
        return None
    return sorted({path for path in out.split("\0") if path})


def list_ignored(root: Path) -> list[str]:
    """Untracked files and folders under `root` that git's excludes leave out, sorted.

    A folder excluded whole is one entry ending in "/" (`--directory`), not its thousand
    files; empty when git fails (the listing then simply says less).
    """
    out = _git(root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    return [] if out is None else sorted({path for path in out.split("\0") if path})


def history(root: Path) -> History:
    """Who touched each file under `root`, and when it was last committed.

    Renames are not followed (`--no-renames`): a file's history starts at its current path,
    which is the one that matters for tombstones and timestamps. Merge commits list no files,
    so they credit no one. A repository without commits has an empty history.
    """
    files: dict[str, FileHistory] = {}
    authors: dict[str, Author] = {}
    newest: dict[str, datetime] = {}
    email = ""
    stamp: datetime | None = None
    for token in _log_tokens(root):
        if token.startswith(_COMMIT):
            name, raw_email, seconds = [*token[1:].split(_FIELD), "", ""][:3]
            email = raw_email.strip().lower()
            stamp = datetime.fromtimestamp(int(seconds), UTC) if seconds.isdigit() else None
            if email:
                authors.setdefault(email, Author(name=name.strip() or email, email=email))
                if stamp is not None and (email not in newest or stamp > newest[email]):
                    newest[email] = stamp
            continue
        entry = files.setdefault(token, FileHistory())
        if email:
            entry.emails.add(email)
        if stamp is not None and (entry.last_commit is None or stamp > entry.last_commit):
            entry.last_commit = stamp
    return History(files=files, authors=authors, last_commit=newest)


def _log_tokens(root: Path) -> Iterator[str]:
    """NUL-separated tokens of the log: commit headers and file paths, streamed."""
    command = [
        "git", "-c", "core.quotepath=off", "log", "-z", "--no-renames", "--name-only",
        "--relative", f"--format={_LOG_FORMAT}", "--", ".",
    ]  # fmt: skip
    try:
        proc = subprocess.Popen(  # noqa: S603 - fixed git arguments, no shell
            command,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return
    with proc:
        stdout = proc.stdout
        if stdout is None:  # pragma: no cover - PIPE always gives a stream
            return
        # Streamed in blocks: the whole log of a large repository does not fit in memory.
        pending = b""
        while block := stdout.read(1 << 16):
            *complete, pending = (pending + block).split(b"\0")
            for raw in complete:
                token = os.fsdecode(raw).lstrip("\n")
                if token:
                    yield token
        tail = os.fsdecode(pending).strip("\n")
        if tail:
            yield tail
