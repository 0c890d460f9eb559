"""Load a folder or git repository as ontology elements and relations, without any model call.

    src = load_repository("path/to/repo")
    client.ingest(src.elements, src.relations)

One `Repository` for the root; a `Document` per text file (source code only when asked); a
`Decision` per numbered record in a decision folder (see `uda.loaders.decisions`); a `Person`
per git author, linked by `authoredBy` from every file their commits touched. Sensitivity and
scope come from front matter, then `.uda-policy.toml` (see `uda.loaders.policy`), then the
default `internal` with no scope.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from ontology import (
    Decision,
    Document,
    Element,
    KnowledgeAsset,
    Person,
    Relation,
    RelationType,
    Repository,
    Sensitivity,
)
from uda.errors import UserError
from uda.loaders import gitlog
from uda.loaders.decisions import (
    DecisionRef,
    LinkSource,
    decision_number,
    decision_relations,
    parse_fields,
)
from uda.loaders.files import (
    MAX_FILE_BYTES,
    FileKind,
    Listing,
    SkipFileError,
    SkippedFile,
    SkipReason,
    file_kind,
    filter_listing,
    read_text,
    refuse_symlink,
    walk,
)
from uda.loaders.markup import markdown_title, rst_title, split_front_matter
from uda.loaders.policy import Policy, load_policy, parse_scope, parse_sensitivity


@dataclass(frozen=True, kw_only=True)
class LoadedSource:
    """What a folder yields: elements and relations sorted by id, and what was left out.

    Attributes:
        repository: The `Repository` element of the root (also in `elements`).
        elements: The repository, documents, decisions and persons, sorted by element_id.
        relations: `partOf`, `authoredBy`, `supersedes` and `governedBy` edges, sorted.
        id_prefix: Every Document and Decision id of this source starts with it: ids in a
            store that start with it but are not loaded any more belong to deleted files.
        skipped: The files and folders not loaded, each with its reason, sorted by path.
    """

    repository: Repository
    elements: list[Element]
    relations: list[Relation]
    id_prefix: str
    skipped: list[SkippedFile]


@dataclass(frozen=True, kw_only=True)
class _File:
    """A file read and classified, before it becomes an element."""

    path: str  # relative to the loaded folder: for reading, history and policy globs
    key: str  # relative to the working tree's top: for ids, uris and links
    kind: FileKind
    text: str
    front_matter: dict[str, Any]
    sensitivity: Sensitivity
    scope: str | None
    name: str
    number: int | None


def load_repository(
    path: str | os.PathLike[str],
    *,
    include_code: bool = False,
    policy: str | os.PathLike[str] | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> LoadedSource:
    """Turn a folder (a git working tree or not) into typed elements and relations.

    Args:
        path: The folder to load.
        include_code: Also load source code and configuration files as documents.
        policy: A policy file to use instead of `<path>/.uda-policy.toml`.
        max_file_bytes: Files larger than this are skipped as `too-big`.

    Returns:
        The loaded source; the same folder always gives the same output.

    Raises:
        UserError: `path` is not a folder, or `max_file_bytes` is below 1.
        InvalidElementError: A front matter or policy sensitivity or scope is invalid, or a
            front matter block is not YAML.
        ConfigError: The policy file is missing (when given), not TOML, or has unknown keys.
    """
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"{path} is not a folder", field="path", value=str(path))
    if max_file_bytes < 1:
        raise UserError(
            f"max_file_bytes {max_file_bytes}: give at least 1 byte",
            field="max_file_bytes",
            value=max_file_bytes,
        )
    rules = load_policy(root, None if policy is None else Path(policy))
    tree = gitlog.work_tree(root)
    url = gitlog.remote_url(root) if tree else None
    folder = tree.top if tree else root
    name = (gitlog.name_from_url(url) if url else None) or folder.name or "root"
    # Ids and uris are relative to the top of the working tree, so that loading a subfolder
    # names files as loading the whole repository does, and its id_prefix covers only it.
    within = tree.prefix if tree else ""
    listing = _listing(root, tree is not None)
    history = gitlog.history(root) if tree else gitlog.History(files={}, authors={}, last_commit={})

    skipped = list(listing.skipped)
    files: list[_File] = []
    for relative in listing.files:
        if not os.path.lexists(root / relative):
            continue  # deleted in the working tree but still in git's index: gone
        try:
            files.append(
                _read(
                    root,
                    relative,
                    within,
                    include_code=include_code,
                    policy=rules,
                    max_file_bytes=max_file_bytes,
                )
            )
        except SkipFileError as skip:
            skipped.append(skip.skipped(relative))

    prefix = f"{name}:"
    repository = Repository(
        element_id=f"repo:{name}",
        name=name,
        url=url,
        sensitivity=rules.default_sensitivity,
        scope=rules.default_scope,
    )
    assets: list[KnowledgeAsset] = []
    relations: list[Relation] = []
    emails: dict[str, set[str]] = {}
    for file in files:
        record = history.files.get(file.path)
        try:
            asset = _asset(root, file, prefix, None if record is None else record.last_commit)
        except ValidationError as exc:
            skipped.append(_invalid(file.path, exc))
            continue
        assets.append(asset)
        relations.append(_edge(asset.element_id, RelationType.PART_OF, repository.element_id))
        for email in sorted(record.emails if record else ()):
            if email in history.authors:
                emails.setdefault(email, set()).add(asset.element_id)

    persons, authored = _authorship(history, emails, rules)
    relations.extend(authored)
    relations.extend(_decision_edges(files, assets))

    if assets:
        # The newest file state dates the repository: deterministic, unlike "now".
        newest = max(asset.timestamp for asset in assets)
        repository = repository.model_copy(update={"timestamp": newest})
    elements: list[Element] = [repository, *assets, *persons]
    return LoadedSource(
        repository=repository,
        elements=sorted({e.element_id: e for e in elements}.values(), key=_element_id),
        relations=sorted({r.key: r for r in relations}.values(), key=lambda r: r.key),
        id_prefix=prefix + within,
        skipped=sorted(set(skipped)),
    )


def _invalid(path: str, exc: ValidationError) -> SkippedFile:
    """The file's element breaks a rule of the ontology: its first error, with the field."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    detail = f"{field}: {error['msg']}" if field else error["msg"]
    return SkippedFile(path, SkipReason.INVALID_ELEMENT, detail)


def _element_id(element: Element) -> str:
    return element.element_id


def _edge(source: str, relation: RelationType, target: str) -> Relation:
    return Relation(source_id=source, relation=relation.value, target_id=target)


def _listing(root: Path, in_git: bool) -> Listing:
    if in_git:
        # git's own list honours .gitignore, .git/info/exclude and the global excludes file;
        # what they leave out is reported too, so that every file is accounted for.
        files = gitlog.list_files(root)
        if files is not None:
            listing = filter_listing(root, files)
            ignored = tuple(
                SkippedFile(path.rstrip("/"), SkipReason.IGNORED_BY_GIT, _IGNORED_DETAIL)
                for path in gitlog.list_ignored(root)
            )
            return replace(listing, skipped=tuple(sorted((*listing.skipped, *ignored))))
    return walk(root)


_IGNORED_DETAIL = "git's excludes leave it out (.gitignore, .git/info/exclude, core.excludesFile)"


def _read(
    root: Path,
    relative: str,
    within: str,
    *,
    include_code: bool,
    policy: Policy,
    max_file_bytes: int,
) -> _File:
    basename = PurePosixPath(relative).name
    if basename.startswith("."):
        raise SkipFileError(SkipReason.HIDDEN_FILE, "its name starts with '.'")
    # Before the folder test, which follows links: a link to a folder is a link, not a submodule.
    refuse_symlink(root / relative)
    if (root / relative).is_dir():
        # git lists a submodule as one entry, its gitlink, which is a folder in the work tree.
        raise SkipFileError(
            SkipReason.NESTED_REPOSITORY, "a git submodule: ingest its repository on its own"
        )
    kind = file_kind(relative)
    if kind is None:
        raise SkipFileError(SkipReason.UNSUPPORTED_TYPE, _unsupported(basename))
    if kind is FileKind.CODE and not include_code:
        raise SkipFileError(
            SkipReason.SOURCE_CODE, "source code: --include-code (include_code=True) loads it"
        )
    text = read_text(root, relative, max_bytes=max_file_bytes)
    front: dict[str, Any] = {}
    if kind is FileKind.MARKDOWN:
        front, text = split_front_matter(text, source=relative)
        if not text.strip():
            raise SkipFileError(SkipReason.EMPTY, "front matter and no text")
    sensitivity, scope = policy.for_path(relative)
    where = f"{relative} front matter"
    if front.get("sensitivity") is not None:
        sensitivity = parse_sensitivity(front["sensitivity"], source=where)
    if front.get("scope") is not None:
        scope = parse_scope(front["scope"], source=where)
    return _File(
        path=relative,
        key=within + relative,
        kind=kind,
        text=text,
        front_matter=front,
        sensitivity=sensitivity or Sensitivity.INTERNAL,
        scope=scope,
        name=_title(kind, text, front) or basename,
        number=None if kind is FileKind.CODE else decision_number(within + relative),
    )


def _unsupported(basename: str) -> str:
    suffix = PurePosixPath(basename).suffix
    if not suffix:
        return f"{basename!r} has no extension and is not a known name such as README or LICENSE"
    return (
        f"{suffix!r} is not a type UDA loads: Markdown, reStructuredText, text "
        "(source code with --include-code)"
    )


def _title(kind: FileKind, text: str, front: dict[str, Any]) -> str | None:
    title = front.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()[:1000]
    if kind is FileKind.MARKDOWN:
        return markdown_title(text)
    if kind is FileKind.RST:
        return rst_title(text)
    return None


def _asset(root: Path, file: _File, prefix: str, committed: datetime | None) -> KnowledgeAsset:
    # Untracked files have no commit; their mtime is the best date there is.
    timestamp = committed or datetime.fromtimestamp((root / file.path).stat().st_mtime, UTC)
    common: dict[str, Any] = {
        "element_id": f"{prefix}{file.key}",
        "name": file.name,
        "uri": file.key,
        "text": file.text,
        "sensitivity": file.sensitivity,
        "scope": file.scope,
        "timestamp": timestamp,
    }
    if file.number is None:
        return Document(**common)
    fields = parse_fields(file.text, file.front_matter)
    return Decision(**common, status=fields.status, decided_on=fields.decided_on)


def _authorship(
    history: gitlog.History, emails: dict[str, set[str]], policy: Policy
) -> tuple[list[Person], list[Relation]]:
    """A Person per author of a loaded file, and `authoredBy` from each file they touched."""
    persons: list[Person] = []
    relations: list[Relation] = []
    for email in sorted(emails):
        author = history.authors[email]
        try:
            person = Person(
                element_id=f"person:{email}",
                name=author.name,
                email=email,
                sensitivity=policy.default_sensitivity,
                scope=policy.default_scope,
                timestamp=history.last_commit.get(email, datetime.now(UTC)),
            )
        except ValidationError:
            continue  # an address git accepted but an id cannot hold (control characters)
        persons.append(person)
        relations.extend(
            _edge(asset_id, RelationType.AUTHORED_BY, person.element_id)
            for asset_id in sorted(emails[email])
        )
    return persons, relations


def _decision_edges(files: list[_File], assets: list[KnowledgeAsset]) -> list[Relation]:
    by_key = {file.key: file for file in files}
    sources: list[LinkSource] = []
    decisions: list[DecisionRef] = []
    for asset in assets:
        file = by_key[asset.uri or ""]
        sources.append(
            LinkSource(
                element_id=asset.element_id,
                path=file.key,
                text=file.text,
                is_decision=file.number is not None,
            )
        )
        if file.number is not None:
            decisions.append(
                DecisionRef(element_id=asset.element_id, path=file.key, number=file.number)
            )
    return decision_relations(sources, decisions)
