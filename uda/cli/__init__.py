"""The `uda` command.

`commands` parses the arguments and runs them; `render` prints answers as tables, JSON or Arrow.
"""

from __future__ import annotations

from uda.cli.commands import main

__all__ = ["main"]
