"""The sensitivity policy of a folder: `.uda-policy.toml`, and checking sensitivity and scope.

```toml
[defaults]                 # the Repository and Person elements (default: internal, no scope)
sensitivity = "public"

[[rule]]                   # documents and decisions; later rules win, field by field
glob = "docs/internal/**"
sensitivity = "confidential"
scope = "project:core"
```

Rules apply field by field, like `.gitattributes`: a later rule that sets only `scope` keeps
the sensitivity an earlier rule gave, so adding a scope rule can never lower a sensitivity.
Unknown keys are errors, not ignored: a misspelt `sensitivty` would otherwise publish files.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import cast

from ontology import Sensitivity
from ontology.elements import SCOPE_PATTERN
from uda.errors import ConfigError, InvalidElementError

POLICY_FILE = ".uda-policy.toml"
_LEVELS = ", ".join(level.value for level in Sensitivity)


def parse_sensitivity(value: object, *, source: str) -> Sensitivity:
    """A sensitivity level from a front matter or policy value (case-insensitive).

    Raises:
        InvalidElementError: The value is not a level; the message names `source`.
    """
    if isinstance(value, str):
        try:
            return Sensitivity(value.strip().lower())
        except ValueError:
            pass
    raise InvalidElementError(
        f"{source}: sensitivity must be one of {_LEVELS}, got {value!r}",
        field="sensitivity",
        value=value,
    )


def parse_scope(value: object, *, source: str) -> str:
    """A `project:<name>` scope from a front matter or policy value.

    Raises:
        InvalidElementError: The value is not a project scope; the message names `source`.
    """
    if isinstance(value, str) and SCOPE_PATTERN.match(value.strip()):
        return value.strip()
    raise InvalidElementError(
        f"{source}: scope must look like 'project:<name>', got {value!r}",
        field="scope",
        value=value,
    )


def glob_pattern(glob: str) -> re.Pattern[str]:
    """Compile a `.gitignore`-style glob over relative POSIX paths.

    `*` and `?` stay within one path component, `**` crosses them, `[...]` is a class; a glob
    without `/` matches a name at any depth, and a leading `/` anchors at the root.
    """
    anchored = "/" in glob.rstrip("/")
    body = glob.strip("/") if glob.endswith("/") else glob.lstrip("/")
    out: list[str] = [] if anchored else ["(?:.*/)?"]
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        elif body[i] == "[" and "]" in body[i + 2 :]:
            close = body.index("]", i + 2)
            inner = body[i + 1 : close]
            negated = inner.startswith("!")
            inner = re.escape(inner[1:] if negated else inner).replace("\\-", "-")
            out.append(f"[{'^' if negated else ''}{inner}]")
            i = close + 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    return re.compile("".join(out))


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One `[[rule]]`: a glob and the fields it sets (None: leaves the field alone)."""

    glob: str
    pattern: re.Pattern[str]
    sensitivity: Sensitivity | None = None
    scope: str | None = None

    def matches(self, path: str) -> bool:
        """Whether the rule applies to `path`, or to a folder that holds it (as in git)."""
        parts = PurePosixPath(path).parts
        return any(
            self.pattern.fullmatch("/".join(parts[:depth])) for depth in range(len(parts), 0, -1)
        )


@dataclass(frozen=True, kw_only=True)
class Policy:
    """Defaults for the context elements and rules for the files of one folder."""

    default_sensitivity: Sensitivity = Sensitivity.INTERNAL
    default_scope: str | None = None
    rules: tuple[Rule, ...] = ()

    def for_path(self, path: str) -> tuple[Sensitivity | None, str | None]:
        """The sensitivity and scope the rules give `path` (None where no rule sets one)."""
        sensitivity: Sensitivity | None = None
        scope: str | None = None
        for rule in self.rules:
            if rule.matches(path):
                sensitivity = rule.sensitivity or sensitivity
                scope = rule.scope or scope
        return sensitivity, scope


def load_policy(root: Path, path: str | Path | None = None) -> Policy:
    """Read the policy at `path`, else `root/.uda-policy.toml`, else the empty policy.

    Raises:
        ConfigError: The file given does not exist, is not TOML, or has unknown keys.
        InvalidElementError: A sensitivity or scope value is invalid.
    """
    file = Path(path) if path is not None else root / POLICY_FILE
    if path is None and not file.is_file():
        return Policy()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read the policy ({exc})", field="policy") from exc
    name = str(file)
    _no_unknown_keys(data, {"defaults", "rule"}, where=name)
    defaults = _table(data.get("defaults", {}), where=f"{name} [defaults]")
    _no_unknown_keys(defaults, {"sensitivity", "scope"}, where=f"{name} [defaults]")
    raw_rules: object = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise ConfigError(f"{name}: rules must be [[rule]] tables", field="rule")
    rules = tuple(
        _rule(_table(raw, where=f"{name} rule {number}"), where=f"{name} rule {number}")
        for number, raw in enumerate(cast("list[object]", raw_rules), start=1)
    )
    sensitivity = defaults.get("sensitivity")
    scope = defaults.get("scope")
    where = f"{name} [defaults]"
    return Policy(
        default_sensitivity=(
            Sensitivity.INTERNAL
            if sensitivity is None
            else parse_sensitivity(sensitivity, source=where)
        ),
        default_scope=None if scope is None else parse_scope(scope, source=where),
        rules=rules,
    )


def _table(value: object, *, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a table", field="policy")
    return {str(key): item for key, item in cast("dict[object, object]", value).items()}


def _rule(raw: dict[str, object], *, where: str) -> Rule:
    _no_unknown_keys(raw, {"glob", "sensitivity", "scope"}, where=where)
    glob = raw.get("glob")
    if not isinstance(glob, str) or not glob.strip():
        raise ConfigError(f"{where}: `glob` must be a non-empty string", field="glob", value=glob)
    sensitivity = raw.get("sensitivity")
    scope = raw.get("scope")
    where = f"{where} (glob {glob!r})"
    return Rule(
        glob=glob,
        pattern=glob_pattern(glob.strip()),
        sensitivity=None if sensitivity is None else parse_sensitivity(sensitivity, source=where),
        scope=None if scope is None else parse_scope(scope, source=where),
    )


def _no_unknown_keys(table: Mapping[str, object], allowed: set[str], *, where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {unknown}; allowed are {sorted(allowed)}",
            field=unknown[0],
        )
