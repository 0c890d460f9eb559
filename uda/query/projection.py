"""What a result carries: long text clipped by default, the fields asked for whole (ADR 40).

A reader judges a result by its ids, type, name, score, matching passage and scalar
properties; a 200 KB document text adds nothing to that but bytes. So by default every
string longer than the profile's `clip_chars` (a result's own properties, its extras, its
snippet) or `context_clip_chars` (a context node's) keeps only its start, and the row's
`truncated` map says which field was clipped and how long it is whole. A request's
`fields` names properties to return whole; `["*"]` returns everything whole, context nodes
too. The element lookup (`GET /v1/elements/{id}`, `Client.element`) always answers whole.

Clipping keeps a true prefix (no ellipsis is added): a client can tell a clipped value by the
map alone, and the full length says how much it is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ontology import element_class, element_types
from ontology.arrow import BASE_FIELDS, property_names

WHOLE = "*"
"""`fields=["*"]`: every field of every result and context node, whole."""
EXTRAS = "extras"
"""`fields=["extras"]`: the free-form extras whole (their keys are not declared anywhere)."""

V = TypeVar("V")

DEFAULT_CLIP_CHARS = 1000
DEFAULT_CONTEXT_CLIP_CHARS = 200
MAX_FIELDS = 64


def known_fields() -> frozenset[str]:
    """Names `fields` may hold: declared properties of any registered type, extras, `*`."""
    names = set(property_names())
    for type_name in element_types():
        cls = element_class(type_name)
        if cls is not None:
            names.update(n for n in cls.model_fields if n not in BASE_FIELDS)
    return frozenset(names | {WHOLE, EXTRAS})


def check_fields(fields: Sequence[str]) -> list[str]:
    """`fields` as given, or ValueError naming the first name no element type has."""
    known = known_fields()
    for name in fields:
        if name not in known:
            raise ValueError(
                f"{name!r} is not a property of any element type; give property names "
                f"(e.g. 'text'), 'extras', or '*' for whole elements"
            )
    return list(fields)


@dataclass(frozen=True, slots=True)
class Projection:
    """How much of each result an answer carries.

    Attributes:
        whole: property names returned whole (`*`: everything, context nodes too).
        clip_chars: the most characters of a result's other strings (and its snippet).
        context_clip_chars: the most characters of a context node's strings.
    """

    whole: frozenset[str] = frozenset()
    clip_chars: int = DEFAULT_CLIP_CHARS
    context_clip_chars: int = DEFAULT_CONTEXT_CLIP_CHARS

    @classmethod
    def of(
        cls,
        fields: Iterable[str] | None,
        *,
        clip_chars: int = DEFAULT_CLIP_CHARS,
        context_clip_chars: int = DEFAULT_CONTEXT_CLIP_CHARS,
    ) -> Projection:
        """A request's `fields` with the profile's clip sizes."""
        return cls(frozenset(fields or ()), clip_chars, context_clip_chars)

    @property
    def everything(self) -> bool:
        """Whether nothing is clipped (`fields=["*"]`)."""
        return WHOLE in self.whole

    def own(
        self, properties: dict[str, Any], extras: dict[str, str], snippet: str | None
    ) -> tuple[dict[str, Any], dict[str, str], str | None, dict[str, int]]:
        """A result's properties, extras and snippet as the answer carries them.

        Returns them (the same objects when nothing was clipped) and what was clipped, by
        path, with full lengths.
        """
        if self.everything:
            return properties, extras, snippet, {}
        truncated: dict[str, int] = {}
        properties = self._clip(properties, self.clip_chars, "", truncated, self.whole)
        if EXTRAS not in self.whole:  # a user subclass's own field travels as an extra
            extras = self._clip(extras, self.clip_chars, "extras.", truncated, self.whole)
        if snippet is not None and len(snippet) > self.clip_chars:
            truncated["snippet"] = len(snippet)
            snippet = snippet[: self.clip_chars]
        return properties, extras, snippet, truncated

    def node(
        self, properties: dict[str, Any], extras: dict[str, str], index: int
    ) -> tuple[dict[str, Any], dict[str, str], dict[str, int]]:
        """A context node's properties and extras as the answer carries them.

        Context says where a result sits (its repository, its decision); its text is one
        call away, so only `*` returns it whole.
        """
        if self.everything:
            return properties, extras, {}
        truncated: dict[str, int] = {}
        prefix = f"context_nodes[{index}]."
        limit = self.context_clip_chars
        properties = self._clip(properties, limit, prefix, truncated, frozenset())
        extras = self._clip(extras, limit, prefix + "extras.", truncated, frozenset())
        return properties, extras, truncated

    @staticmethod
    def _clip(
        values: dict[str, V],
        limit: int,
        prefix: str,
        truncated: dict[str, int],
        whole: frozenset[str],
    ) -> dict[str, V]:
        clipped: dict[str, V] | None = None
        for key, value in values.items():
            if isinstance(value, str) and len(value) > limit and key not in whole:
                if clipped is None:
                    clipped = dict(values)  # the given dict may be shared: copy, once
                clipped[key] = value[:limit]  # pyright: ignore[reportArgumentType]
                truncated[prefix + key] = len(value)
        return values if clipped is None else clipped


def node_truncations(
    truncated: Mapping[str, int],
) -> tuple[dict[str, int], dict[int, dict[str, int]]]:
    """A row's `truncated` map split into the result's own fields and each context node's."""
    own: dict[str, int] = {}
    nodes: dict[int, dict[str, int]] = {}
    for path, length in truncated.items():
        if path.startswith("context_nodes["):
            index, _, field = path[len("context_nodes[") :].partition("].")
            nodes.setdefault(int(index), {})[field] = length
        else:
            own[path] = length
    return own, nodes


__all__ = [
    "DEFAULT_CLIP_CHARS",
    "DEFAULT_CONTEXT_CLIP_CHARS",
    "EXTRAS",
    "MAX_FIELDS",
    "WHOLE",
    "Projection",
    "check_fields",
    "known_fields",
    "node_truncations",
]
