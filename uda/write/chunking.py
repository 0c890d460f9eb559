"""Split knowledge-asset text into chunks that fit the embedding model.

Paragraphs (blank-line separated) are packed greedily up to a token budget; a heading starts
a new chunk; a paragraph over the budget is split on sentence ends, then on words. The
budget counts words times 1.3, a safe over-estimate of MiniLM's word pieces for English, under
its 256-token window once the element's name is prefixed.
"""

from __future__ import annotations

import re

DEFAULT_MAX_TOKENS = 200
_TOKENS_PER_WORD = 1.3
_PARAGRAPH = re.compile(r"\n\s*\n")
_HEADING = re.compile(r"^(#{1,6}\s|[^\n]+\n[=-]{3,}\s*$)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def estimate_tokens(text: str) -> int:
    """A cheap, conservative token count."""
    return int(len(text.split()) * _TOKENS_PER_WORD) + 1


def chunk_text(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> list[str]:
    """Chunks of `text`, in order, each within `max_tokens` (estimated); never empty."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH.split(text.strip()):
        paragraph = paragraph.strip()
        if paragraph:
            pieces.extend(_split_long(paragraph, max_tokens))
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        cost = estimate_tokens(piece)
        if current and (size + cost > max_tokens or _HEADING.match(piece)):
            chunks.append("\n\n".join(current))
            current, size = [], 0
        current.append(piece)
        size += cost
    if current:
        chunks.append("\n\n".join(current))
    return chunks or [text.strip() or text]


def _split_long(paragraph: str, max_tokens: int) -> list[str]:
    if estimate_tokens(paragraph) <= max_tokens:
        return [paragraph]
    out: list[str] = []
    current: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        words = sentence.split()
        # A sentence longer than the budget is cut on word boundaries.
        step = max(1, int(max_tokens / _TOKENS_PER_WORD) - 1)
        for start in range(0, len(words), step):
            part = " ".join(words[start : start + step])
            if current and estimate_tokens(" ".join([*current, part])) > max_tokens:
                out.append(" ".join(current))
                current = []
            current.append(part)
    if current:
        out.append(" ".join(current))
    return out
