"""Errors of the HTTP layer that both the server and the Python client raise.

They are `UserError`s: the caller can fix them (send a credential, ask another principal,
ask for another id). Kept free of web-framework and token imports, so that the client needs
neither.
"""

from __future__ import annotations

from uda.errors import UserError


class AuthenticationError(UserError):
    """Credentials are missing, malformed, ambiguous or do not verify (HTTP 401)."""

    def __init__(self, message: str, *, invalid_token: bool = False) -> None:
        super().__init__(message, field="Authorization")
        self.invalid_token = invalid_token


class PermissionDeniedError(UserError):
    """The principal is known but may not do this (HTTP 403); never used to hide data."""


class ElementNotFoundError(UserError):
    """No element with this id that the caller may see (HTTP 404): hidden reads as missing."""
