"""The one rule for characters no store keeps the same way: NUL and lone surrogates.

PostgreSQL's `text` cannot hold U+0000, and no UTF-8 store can hold a lone surrogate
(U+D800..U+DFFF without its pair); SQLite and Chroma would keep both. So that a corpus
behaves the same on every profile, UDA refuses both everywhere: in what is written (ingest
on any surface) and in what is asked (`uda.query.bounds`). Other control characters (tab,
newline, the rest of C0) are stored as they are on every profile.
"""

from __future__ import annotations


def forbidden_character(text: str) -> str | None:
    """What is wrong with `text` (None: nothing): "a NUL character at 12", ..."""
    nul = text.find("\x00")
    if nul >= 0:
        return f"a NUL character (U+0000) at position {nul}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate (U+{ord(text[exc.start]):04X}) at position {exc.start}"
    return None


__all__ = ["forbidden_character"]
