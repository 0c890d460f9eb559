"""Search cursors: opaque, authenticated tokens for the next page (docs/adr/0023).

A cursor says where the next page starts (an offset into a ranked answer, or the last row's
key in a structured one) and pins what the pages must share: the HLC stamp the first page
read (so an ingest between pages moves nothing), the clock decay was computed at, and the
ranked pool. It is bound to the query by a fingerprint of everything that shapes the answer,
the caller's resolved clearance included, and sealed with an HMAC keyed by the store's
secret: a cursor that was altered, or that is replayed with other filters or another
clearance, is refused — it never widens an answer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from connectors.contract.selection import Keyset
from uda.errors import InvalidRequestError

_VERSION = 1
_MAC_BYTES = 16


@dataclass(frozen=True, kw_only=True)
class Position:
    """Where a cursor resumes, and what the first page pinned.

    Attributes:
        as_of: the HLC stamp every page reads at.
        now_ms: the wall clock (ms) decay is computed at, the first page's.
        offset: ranked answers: how many results the pages before returned.
        pool: ranked answers: the candidate pool the first page ranked.
        after: structured answers: the last returned row's order value and element id.
        query_id: the saved query the pages belong to.
        auto: ranked answers: the automatic mode the first page ran in (`AutoMode`), so
            that every page ranks the same way even if the store's graph changed between.
        tuned_weight: ranked answers: the PageRank weight `uda tune` had chosen when the
            first page ran (None: none), kept for the same reason.
    """

    as_of: int
    now_ms: int
    offset: int = 0
    pool: int | None = None
    after: Keyset | None = None
    query_id: str | None = None
    auto: str | None = None
    tuned_weight: float | None = None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Cursors:
    """Seals and opens cursors with one store's secret.

    Args:
        secret: the store's `instance_secret()`: every client of the store can open the
            cursors any of them sealed.
    """

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def fingerprint(self, shape: dict[str, Any]) -> str:
        """A keyed digest of what shapes an answer (nothing in it can be read back)."""
        canonical = json.dumps(shape, sort_keys=True, separators=(",", ":"), default=str)
        digest = hmac.new(self._secret, b"query\x00" + canonical.encode(), hashlib.sha256)
        return _b64(digest.digest()[:_MAC_BYTES])

    def seal(self, position: Position, fingerprint: str) -> str:
        """The cursor for `position` of the query with `fingerprint`."""
        after = position.after
        body: dict[str, Any] = {
            "v": _VERSION,
            "q": fingerprint,
            "h": position.as_of,
            "t": position.now_ms,
            "i": position.query_id,
        }
        if after is None:
            body.update(o=position.offset, p=position.pool, a=position.auto)
            if position.tuned_weight is not None:
                body["w"] = position.tuned_weight
        else:
            body.update(k=[after.value, after.element_id])
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def open(self, cursor: str, fingerprint: str) -> Position:
        """The position a cursor stands for, if it is authentic and belongs to this query.

        Raises:
            InvalidRequestError: naming `cursor`: not a cursor, altered, of another store,
                or of another query (other filters, options or clearance).
        """
        payload = self._authentic(cursor)
        try:
            body: dict[str, Any] = json.loads(payload)
            if body.get("v") != _VERSION:
                raise _refused(cursor, "it was made by another version of UDA")
            if not hmac.compare_digest(str(body["q"]), fingerprint):
                raise _refused(
                    cursor,
                    "it belongs to another query: repeat the first page's query, filters, "
                    "options and clearance exactly (only limit may change)",
                )
            as_of, now_ms, query_id = int(body["h"]), int(body["t"]), body.get("i")
            if "k" in body:
                value, element_id = body["k"]
                return Position(
                    as_of=as_of,
                    now_ms=now_ms,
                    after=Keyset(value=value, element_id=element_id),
                    query_id=query_id,
                )
            pool = body["p"]
            return Position(
                as_of=as_of,
                now_ms=now_ms,
                offset=int(body["o"]),
                pool=None if pool is None else int(pool),
                query_id=query_id,
                auto=None if body.get("a") is None else str(body["a"]),
                tuned_weight=None if body.get("w") is None else float(body["w"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidRequestError):
                raise
            raise _refused(cursor, "it is not a cursor UDA made") from None

    def _authentic(self, cursor: str) -> bytes:
        encoded, dot, mac = cursor.partition(".")
        try:
            payload, given = _unb64(encoded), _unb64(mac)
        except (binascii.Error, ValueError):
            raise _refused(cursor, "it is not a cursor UDA made") from None
        if not dot or not hmac.compare_digest(given, self._mac(payload)):
            raise _refused(
                cursor, "it was altered, or made by another store: use next_cursor as given"
            )
        return payload

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, b"cursor\x00" + payload, hashlib.sha256).digest()[:_MAC_BYTES]


def _refused(cursor: str, why: str) -> InvalidRequestError:
    return InvalidRequestError(f"cursor: refused, {why}", field="cursor", value=cursor[:40])


__all__ = ["Cursors", "Position"]
