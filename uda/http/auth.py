"""Authentication: API keys and signed bearer tokens, each naming a principal and its grant.

Deny by default (docs/design.md, "Clearance"): a request without credentials is refused unless the
server was started to serve anonymous callers, who then get `public` only. A request with
credentials that do not verify is refused even then — wrong credentials never fall back to
anonymous access. See docs/adr/0011-http-service-and-authenticated-clearance.md.

- API keys are stored as SHA-256 digests in a TOML file and compared in constant time. A key
  is 32 random bytes, so a fast hash is enough: there is nothing to brute-force, and the file
  leaks no usable key.
- Tokens are JWTs signed with HMAC-SHA256 by a shared secret; `exp` and `sub` are required,
  `clearance` carries the grant and `can_write` the right to ingest. Only HS256 verifies:
  `alg: none` and every other algorithm are refused before the signature is looked at.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jwt

from uda.errors import ConfigError, UnknownClearanceError
from uda.http.errors import AuthenticationError
from uda.http.wire import API_KEY_HEADER
from uda.query.clearance import Clearance

TOKEN_ALGORITHM = "HS256"  # noqa: S105 - an algorithm name, not a secret
MIN_SECRET_BYTES = 32  # RFC 7518 3.2: an HS256 key at least as long as the hash output
_HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")

Method = Literal["api_key", "token", "anonymous"]


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who is calling: a name, the clearance they are granted, and whether they may write."""

    name: str
    clearance: Clearance
    can_write: bool = False
    method: Method = "api_key"


ANONYMOUS = Principal(name="anonymous", clearance=Clearance(), can_write=False, method="anonymous")


@dataclass(frozen=True, kw_only=True)
class ApiKey:
    """One entry of the keys file: the digest of a key and what it grants."""

    name: str
    sha256: str
    clearance: Clearance
    can_write: bool = False


def hash_api_key(key: str) -> str:
    """The hex SHA-256 digest stored in the keys file for `key`."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_api_key() -> str:
    """A fresh random API key (256 bits; show it once, store only `hash_api_key(key)`)."""
    return "uda_" + secrets.token_urlsafe(32)


def key_entry_toml(
    name: str, key: str, clearance: Iterable[str], *, can_write: bool = False
) -> str:
    """The `[[keys]]` entry of the keys file for `key` (which the file never contains)."""
    entries = Clearance.parse(list(clearance)).entries()
    shown = ", ".join(f'"{e}"' for e in entries)
    return (
        f'[[keys]]\nname = "{name}"\nsha256 = "{hash_api_key(key)}"\n'
        f"clearance = [{shown}]\ncan_write = {'true' if can_write else 'false'}\n"
    )


def load_api_keys(path: str | Path) -> tuple[ApiKey, ...]:
    """Read a keys file: `[[keys]]` tables with `name`, `sha256`, `clearance`, `can_write`.

    Raises:
        ConfigError: the file is missing or malformed, naming the entry and the field.
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no keys file at {file}", field="--keys", value=str(file)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: {exc}", field="--keys", value=str(file)) from None
    entries: Any = data.get("keys", [])
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{file}: no [[keys]] entries", field="keys", value=str(file))
    keys = [_api_key(entry, i) for i, entry in enumerate(entries)]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    for attribute in ("name", "sha256"):
        values = [getattr(k, attribute) for k in keys]
        if len(set(values)) != len(values):
            raise ConfigError(f"{file}: two keys share a {attribute}", field=f"keys.{attribute}")
    return tuple(keys)


def _api_key(entry: Any, position: int) -> ApiKey:
    where = f"keys[{position}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a table", field=where, value=entry)
    item: dict[str, Any] = dict(entry)  # pyright: ignore[reportUnknownArgumentType]
    unknown = sorted(set(item) - {"name", "sha256", "clearance", "can_write"})
    if unknown:
        raise ConfigError(f"{where}: unknown fields {unknown}", field=where, value=unknown)
    name, digest = item.get("name"), str(item.get("sha256", "")).lower()
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: a non-empty string is required", field=f"{where}.name")
    if not _HEX_DIGEST.match(digest):
        raise ConfigError(
            f"{where}.sha256: 64 hex digits expected (the SHA-256 of the key)",
            field=f"{where}.sha256",
        )
    clearance, can_write = item.get("clearance", []), item.get("can_write", False)
    if not isinstance(clearance, list) or not isinstance(can_write, bool):
        raise ConfigError(
            f"{where}: clearance must be a list of entries and can_write a boolean", field=where
        )
    try:
        granted = Clearance.parse(clearance)  # pyright: ignore[reportUnknownArgumentType]
    except UnknownClearanceError as exc:
        raise ConfigError(f"{where}.clearance: {exc}", field=f"{where}.clearance") from None
    return ApiKey(name=name, sha256=digest, clearance=granted, can_write=can_write)


def issue_token(
    secret: str | bytes,
    *,
    subject: str,
    clearance: Iterable[str],
    can_write: bool = False,
    ttl_seconds: float = 3600,
    audience: str | None = None,
) -> str:
    """A signed bearer token for `subject` (for operators, tests and the README)."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": subject,
        "iat": now,
        "exp": now + int(ttl_seconds),
        "clearance": Clearance.parse(list(clearance)).entries(),
        "can_write": can_write,
    }
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, _secret_bytes(secret), algorithm=TOKEN_ALGORITHM)


def _secret_bytes(secret: str | bytes) -> bytes:
    value = secret.encode() if isinstance(secret, str) else secret
    if len(value) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"the token secret must be at least {MIN_SECRET_BYTES} bytes long",
            field="token_secret",
        )
    return value


class Authenticator:
    """Turns a request's headers into a `Principal`, or refuses.

    Args:
        api_keys: the accepted keys (see `load_api_keys`).
        token_secret: the HMAC secret of bearer tokens (None: tokens are not accepted).
        token_audience: the `aud` tokens must carry (None: tokens must carry none).
        allow_anonymous: serve callers without credentials, with `public` clearance only.
    """

    def __init__(
        self,
        *,
        api_keys: Sequence[ApiKey] = (),
        token_secret: str | bytes | None = None,
        token_audience: str | None = None,
        allow_anonymous: bool = False,
    ) -> None:
        self._keys = tuple(api_keys)
        self._secret = None if token_secret is None else _secret_bytes(token_secret)
        self._audience = token_audience
        self.allow_anonymous = allow_anonymous

    @property
    def configured(self) -> bool:
        """Whether any credential can succeed (keys or tokens), anonymous access aside."""
        return bool(self._keys) or self._secret is not None

    def challenge(self) -> str:
        """The `WWW-Authenticate` value of a 401 (RFC 9110 11.6.1)."""
        return f'Bearer realm="uda", ApiKey realm="uda", header="{API_KEY_HEADER}"'

    def authenticate(self, headers: Mapping[str, Sequence[str]]) -> Principal:
        """The principal named by the credentials in `headers` (lower-case name -> values).

        Raises:
            AuthenticationError: no credentials (and no anonymous access), more than one
                credential, or one that does not verify.
        """
        bearer = headers.get("authorization", [])
        keys = headers.get(API_KEY_HEADER.lower(), [])
        # One credential, sent once: two values could be read differently by a proxy and by
        # us, so an ambiguous request is refused rather than resolved.
        if len(bearer) + len(keys) > 1:
            raise AuthenticationError("send exactly one credential (one header, once)")
        if keys:
            return self._by_key(keys[0].strip())
        if bearer:
            scheme, _, token = bearer[0].strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthenticationError("Authorization must be 'Bearer <token>'")
            return self._by_token(token.strip())
        if self.allow_anonymous:
            return ANONYMOUS
        raise AuthenticationError("credentials required: an API key or a bearer token")

    def _by_key(self, presented: str) -> Principal:
        digest = hash_api_key(presented)
        found: ApiKey | None = None
        for key in self._keys:  # no early exit: the time taken does not depend on the match
            if hmac.compare_digest(digest, key.sha256):
                found = key
        if found is None or not presented:
            raise AuthenticationError("unknown API key")
        return Principal(name=found.name, clearance=found.clearance, can_write=found.can_write)

    def _by_token(self, token: str) -> Principal:
        if self._secret is None:
            raise AuthenticationError("bearer tokens are not accepted here", invalid_token=True)
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[TOKEN_ALGORITHM],
                audience=self._audience,
                options={"require": ["exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"invalid token: {exc}", invalid_token=True) from None
        clearance, can_write = claims.get("clearance", []), claims.get("can_write", False)
        subject = claims["sub"]
        if (
            not isinstance(clearance, list)
            or not isinstance(can_write, bool)
            or not isinstance(subject, str)
        ):
            raise AuthenticationError("invalid token: malformed claims", invalid_token=True)
        try:
            granted = Clearance.parse(clearance)  # pyright: ignore[reportUnknownArgumentType]
        except UnknownClearanceError:
            raise AuthenticationError(
                "invalid token: unknown clearance entry", invalid_token=True
            ) from None
        return Principal(name=subject, clearance=granted, can_write=can_write, method="token")
