"""The command line's exit codes and its own usage error."""

from __future__ import annotations

from uda.errors import UserError

EXIT_OK, EXIT_DIFFERENCES, EXIT_USAGE, EXIT_BACKEND, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class CliError(UserError):
    """A usage mistake the command line itself detects."""


__all__ = [
    "EXIT_BACKEND",
    "EXIT_DIFFERENCES",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
]
