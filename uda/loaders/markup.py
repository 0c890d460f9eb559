"""Reading plain markup without a parser: front matter, titles, and link targets.

Good enough for names and relations; the text itself is kept as written, so nothing here has
to be a faithful Markdown or reStructuredText implementation.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import unquote

import yaml

from uda.errors import InvalidElementError

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_H1 = re.compile(r"^ {0,3}=+[ \t]*$")
_RST_ADORNMENT = re.compile(r"^([=\-~^\"'`*+#:.<>_!$%&,;?@\\|/])\1{2,}[ \t]*$")
_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
_REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_MAX_NAME = 1000


def split_front_matter(text: str, *, source: str) -> tuple[dict[str, Any], str]:
    """Split YAML front matter (`---` ... `---` at the very top) from a Markdown text.

    A block that parses to something other than a mapping (a Markdown horizontal rule around
    a paragraph, say) is not front matter and stays in the text.

    Args:
        text: The file's text, newlines normalised.
        source: The file's relative path, for error messages.

    Returns:
        The front matter (keys lowercased; empty when there is none) and the remaining text.

    Raises:
        InvalidElementError: The block is not valid YAML. Loading the file anyway would drop
            its sensitivity, so a typo must not silently make a document more visible.
    """
    if not text.startswith("---\n"):
        return {}, text
    lines = text.split("\n")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return {}, text
    block = "\n".join(lines[1:end])
    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        raise InvalidElementError(
            f"{source}: the front matter is not valid YAML ({exc})",
            field="front matter",
            value=block[:200],
        ) from exc
    if data is not None and not isinstance(data, dict):
        return {}, text
    items = cast("dict[object, Any]", data or {}).items()
    matter = {str(key).strip().lower(): value for key, value in items}
    return matter, "\n".join(lines[end + 1 :]).lstrip("\n")


def _outside_fences(text: str) -> Iterator[tuple[int, list[str]]]:
    """Indexes of the lines that are not inside fenced code blocks, with all the lines."""
    lines = text.split("\n")
    fence: str | None = None
    for index, line in enumerate(lines):
        match = _FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None:
            yield index, lines


def markdown_title(text: str) -> str | None:
    """The first level-1 heading (`# Title` or a `===`-underlined line), outside code fences."""
    previous: str | None = None
    for index, lines in _outside_fences(text):
        line = lines[index]
        atx = _ATX_H1.match(line)
        if atx:
            return _clean(atx.group(1))
        if previous and previous.strip() and _SETEXT_H1.match(line):
            return _clean(previous)
        previous = line
    return None


def rst_title(text: str) -> str | None:
    """The first reStructuredText section title (a line underlined, maybe overlined)."""
    lines = text.split("\n")
    for index in range(len(lines) - 1):
        title, under = lines[index].strip(), lines[index + 1].rstrip()
        if (
            title
            and not _RST_ADORNMENT.match(title)
            and _RST_ADORNMENT.match(under)
            and len(under) >= len(title)
        ):
            return _clean(title)
    return None


def _clean(title: str) -> str | None:
    title = title.strip()
    return title[:_MAX_NAME] if title else None


def link_targets(line: str) -> list[str]:
    """Link targets of a line: inline `[text](target)` and reference `[id]: target` links."""
    targets = [m.group(1) for m in _INLINE_LINK.finditer(line)]
    reference = _REFERENCE_LINK.match(line)
    if reference:
        targets.append(reference.group(1))
    return targets


def resolve_link(source: str, target: str) -> str | None:
    """The relative POSIX path a link in file `source` points at, or None.

    External links (with a scheme), pure anchors and links leaving the root resolve to None;
    `/path` is read from the root, as code hosts render it.
    """
    target = unquote(target.split("#", 1)[0].split("?", 1)[0]).strip()
    if not target or _SCHEME.match(target) or target.startswith("//"):
        return None
    if target.startswith("/"):
        joined = target.lstrip("/")
    else:
        joined = posixpath.join(posixpath.dirname(source), target)
    resolved = posixpath.normpath(joined)
    if resolved in (".", "") or resolved.startswith("../") or resolved == "..":
        return None
    return resolved
