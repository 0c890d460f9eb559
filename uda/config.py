"""Profiles: which connectors to use, where their data lives, and search defaults.

`embedded` (the default) needs no server: Chroma, networkx and SQLite under one folder.
A TOML file may name its own connectors and defaults:

    [uda]
    path = ".uda"                # data root; relative paths resolve against the file

    [[connectors]]
    name = "chroma"
    path = "chroma"              # connector options, relative to the data root

    [search]
    half_life_days = 365
    decay_floor = 0.8
    weights = { semantic = 1.0, lexical = 1.0, centrality = 0.2 }
    graph_mode = "auto"          # or "context" / "associative" (uda/query/auto)
    clip_chars = 1000            # a result's long text in an answer (`fields` asks whole)
    context_clip_chars = 200     # a context node's long text in an answer
    call_timeout_s = 2.0         # each backend call (docs/adr/0026)
    search_timeout_s = 5.0       # the whole search; a request's `timeout` overrides it
    timeouts = { arcadedb = 1.0 }  # per connector, by name
    connect_timeout_s = 10.0     # at start, for a store other than the system of record
    write_timeout_s = 60.0       # one ingest page into a derived store (else: `uda sync`)

    [embedder]                   # with `[uda] embedder = "openai-compatible"` only
    url = "http://127.0.0.1:8081/v1"   # POST {url}/embeddings, OpenAI's wire format
    model = "all-MiniLM-L6-v2"
    api_key_env = "EMBEDDINGS_API_KEY" # the variable holding the key (never the key itself)
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uda.embedding.factory import DEFAULT_EMBEDDER, EMBEDDERS, EmbedderName, embedder_options
from uda.errors import ConfigError
from uda.query.deadlines import Deadlines
from uda.query.fusion import DEFAULT_WEIGHTS, Leg
from uda.query.projection import DEFAULT_CLIP_CHARS, DEFAULT_CONTEXT_CLIP_CHARS

DEFAULT_ROOT = Path(".uda")


@dataclass(frozen=True, kw_only=True)
class ConnectorSpec:
    """A connector by registry name, with its constructor options."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True, kw_only=True)
class SearchDefaults:
    """Search settings a request may override."""

    weights: Mapping[Leg, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    graph_mode: str = "auto"
    """`[search] graph_mode`: "auto" (chosen from the graph's shape, uda/query/auto),
    "context" or "associative" (always that mode)."""
    pinned: frozenset[Leg] = frozenset()
    """The legs whose weight the profile sets (`[search.weights]`): the automatic mode
    leaves them as set."""
    half_life_days: float = 365.0
    decay_floor: float = 0.8
    max_context_nodes: int = 25
    clip_chars: int = DEFAULT_CLIP_CHARS
    """`[search] clip_chars`: the most characters of a result's long text fields in an
    answer, unless the request names them in `fields` (uda/query/projection.py)."""
    context_clip_chars: int = DEFAULT_CONTEXT_CLIP_CHARS
    """`[search] context_clip_chars`: the same for context nodes' fields."""
    deadlines: Deadlines = field(default_factory=Deadlines)


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A resolved profile: a name, a data root, connectors, and search defaults."""

    name: str
    root: Path
    connectors: tuple[ConnectorSpec, ...]
    search: SearchDefaults = field(default_factory=SearchDefaults)
    model_path: str | None = None
    embedder: EmbedderName = DEFAULT_EMBEDDER
    """Which runtime embeds (`[uda] embedder`): `onnx` (ONNX Runtime, the default),
    `sentence-transformers` (torch; the same vectors, docs/adr/0027-onnx-embedder.md) or
    `openai-compatible` (an HTTP endpoint named in `[embedder]`)."""
    embedding_cache: bool = True
    """Keep document vectors in the persistent embedding cache (`[uda] embedding_cache`):
    a text is embedded once per model (docs/adr/0028-embedder-fingerprints-and-cache.md)."""
    cluster: str | None = None
    """A Dask scheduler (`[uda] cluster`, `tcp://host:8786`) whose workers embed the
    documents of an ingest (`uda.embedding.cluster`); None: embed in this process."""
    embedder_options: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """The runtime's settings (`[embedder]`, checked for `embedder`): for `openai-compatible`
    the endpoint, model, key variable, batching and retries (uda/embedding/http.py)."""


def embedded_profile(root: str | Path = DEFAULT_ROOT) -> Profile:
    """The zero-server default: Chroma, networkx and SQLite under `root`."""
    base = Path(root)
    return Profile(
        name="embedded",
        root=base,
        connectors=(
            ConnectorSpec(name="sqlite", options={"path": str(base / "uda.sqlite3")}),
            ConnectorSpec(name="chroma", options={"path": str(base / "chroma")}),
            ConnectorSpec(name="networkx", options={"path": str(base / "graph")}),
        ),
    )


def load_profile(target: str | Path | None = None, *, path: str | Path | None = None) -> Profile:
    """Resolve what `uda.connect()` was given.

    Args:
        target: None or "embedded" (the default profile), a folder (embedded, rooted there),
            or a `.toml` file.
        path: the data root for the embedded profile (default `./.uda`).
    """
    if target is None or str(target) == "embedded":
        return embedded_profile(path if path is not None else DEFAULT_ROOT)
    candidate = Path(target)
    if candidate.suffix == ".toml":
        return _from_toml(candidate, path)
    if candidate.exists() and not candidate.is_dir():
        raise ConfigError(
            f"{target!s} is neither a folder nor a .toml profile", field="target", value=target
        )
    return embedded_profile(candidate)


def _from_toml(file: Path, root_override: str | Path | None) -> Profile:
    try:
        data = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no profile file at {file}", field="target", value=str(file)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: {exc}", field="target", value=str(file)) from None
    section = data.get("uda", {})
    root = Path(root_override or section.get("path", DEFAULT_ROOT))
    if not root.is_absolute():
        root = file.parent / root
    embedder = _embedder(section.get("embedder", DEFAULT_EMBEDDER))
    specs_data = data.get("connectors")
    if specs_data is None:
        base = embedded_profile(root)
        specs = base.connectors
    else:
        specs = tuple(_connector_spec(item, root) for item in specs_data)
    return Profile(
        name=str(section.get("profile", file.stem)),
        root=root,
        connectors=specs,
        search=_search_defaults(data.get("search", {})),
        model_path=section.get("model_path"),
        embedder=embedder,
        embedding_cache=_flag(section.get("embedding_cache", True), "embedding_cache"),
        cluster=_cluster(section.get("cluster")),
        embedder_options=_embedder_options(embedder, data.get("embedder", {})),
    )


def _cluster(value: Any) -> str | None:
    """`[uda] cluster`: a scheduler address, `${VAR}` read from the environment."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            "[uda] cluster must be a Dask scheduler address such as 'tcp://10.0.0.5:8786'",
            field="uda.cluster",
            value=value,
        )
    expanded: str = _expand(value.strip(), "cluster", "uda")
    return expanded


def _embedder_options(kind: EmbedderName, table: Any) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError("[embedder] must be a table", field="embedder", value=table)
    entries: dict[str, Any] = dict(table)  # pyright: ignore[reportUnknownArgumentType]
    expanded = {k: _expand(v, k, section="embedder") for k, v in entries.items()}
    return embedder_options(kind, expanded)


def _embedder(value: Any) -> EmbedderName:
    if value not in EMBEDDERS:
        raise ConfigError(
            f"[uda] embedder: {value!r} is not an embedder; use one of {', '.join(EMBEDDERS)}",
            field="embedder",
            value=value,
        )
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"[uda] {name}: {value!r} is not true or false", field=name, value=value)
    return value


def _connector_spec(item: Any, root: Path) -> ConnectorSpec:
    if not isinstance(item, dict) or "name" not in item:
        raise ConfigError("each [[connectors]] entry needs a name", field="connectors", value=item)
    entry: dict[str, Any] = dict(item)  # pyright: ignore[reportUnknownArgumentType]
    options = {k: _expand(v, k) for k, v in entry.items() if k != "name"}
    path = options.get("path")
    if isinstance(path, str) and not Path(path).is_absolute():
        options["path"] = str(root / path)
    return ConnectorSpec(name=str(entry["name"]), options=options)


_UNSET_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def _expand(value: Any, key: str, section: str = "connectors") -> Any:
    """`${VAR}` in a string option comes from the environment (passwords stay out of files).

    So does each string of a list option (a PostgreSQL connector's `standbys`).
    """
    if isinstance(value, list):
        return [_expand(item, key, section) for item in value]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(value, str):
        return value
    expanded = os.path.expandvars(value)
    missing = _UNSET_VARIABLE.search(expanded)
    if missing:
        raise ConfigError(
            f"option {section}.{key} uses ${{{missing.group(1)}}}, which is not set in the "
            "environment",
            field=f"{section}.{key}",
            value=value,
        )
    return expanded


GRAPH_MODES = ("auto", "context", "associative")


def _graph_mode(value: object) -> str:
    if value not in GRAPH_MODES:
        raise ConfigError(
            f"[search] graph_mode must be one of {', '.join(GRAPH_MODES)}, not {value!r}",
            field="search.graph_mode",
            value=value,
        )
    return str(value)


def _search_defaults(section: Mapping[str, Any]) -> SearchDefaults:
    defaults = SearchDefaults()
    weights = dict(defaults.weights)
    weights_section: dict[str, Any] = dict(section.get("weights", {}))
    for leg, value in weights_section.items():
        try:
            weights[Leg(leg)] = float(value)
        except ValueError:
            raise ConfigError(
                f"unknown fusion leg {leg!r} in [search.weights]; use "
                f"{', '.join(x.value for x in Leg)}",
                field="search.weights",
                value=leg,
            ) from None
    return SearchDefaults(
        weights=weights,
        pinned=frozenset(Leg(leg) for leg in weights_section),
        graph_mode=_graph_mode(section.get("graph_mode", defaults.graph_mode)),
        half_life_days=float(section.get("half_life_days", defaults.half_life_days)),
        decay_floor=float(section.get("decay_floor", defaults.decay_floor)),
        max_context_nodes=int(section.get("max_context_nodes", defaults.max_context_nodes)),
        clip_chars=_chars(section.get("clip_chars", defaults.clip_chars), "search.clip_chars"),
        context_clip_chars=_chars(
            section.get("context_clip_chars", defaults.context_clip_chars),
            "search.context_clip_chars",
        ),
        deadlines=_deadlines(section, defaults.deadlines),
    )


def _chars(value: Any, name: str) -> int:
    """A clip size: a whole number of characters in [1, 1,000,000], or a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ConfigError(
            f"{name} must be a whole number of characters in [1, 1000000], not {value!r}",
            field=name,
            value=value,
        )
    return value


def _seconds(value: Any, name: str) -> float:
    """A positive, finite number of seconds, or a ConfigError naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 600:
        raise ConfigError(
            f"{name} must be a number of seconds in (0, 600], not {value!r}",
            field=name,
            value=value,
        )
    return float(value)


def _deadlines(section: Mapping[str, Any], defaults: Deadlines) -> Deadlines:
    """`call_timeout_s`, `search_timeout_s` and `[search.timeouts]` (seconds per connector)."""
    per_connector = {
        str(name): _seconds(value, f"search.timeouts.{name}")
        for name, value in dict(section.get("timeouts", {})).items()
    }
    return Deadlines(
        call_s=_seconds(section.get("call_timeout_s", defaults.call_s), "search.call_timeout_s"),
        search_s=_seconds(
            section.get("search_timeout_s", defaults.search_s), "search.search_timeout_s"
        ),
        connect_s=_seconds(
            section.get("connect_timeout_s", defaults.connect_s), "search.connect_timeout_s"
        ),
        write_s=_seconds(
            section.get("write_timeout_s", defaults.write_s), "search.write_timeout_s"
        ),
        per_connector=per_connector,
    )
