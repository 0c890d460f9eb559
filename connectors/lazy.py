"""Names a package exports from a module it imports only when one of them is first used.

A backend package (`connectors.postgres`) names its connector classes, but importing one of
its helper modules (`connectors.postgres.filter_sql`) must not import the backend's library, which
may not be installed: the package's `__getattr__` loads the connector module on demand.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any


def lazy_exports(package: str, module: str, names: Sequence[str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that loads `names` from `module` on first use."""
    exported = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in exported:
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
