"""The error tree, as UDA's public API names it (`uda.UserError`, `uda.errors.ConnectorError`).

The tree lives in `connectors.contract.errors`, beneath both the connectors that raise it and
the planner that maps it to exit codes and HTTP statuses; this module is its public address.
"""

from __future__ import annotations

from connectors.contract.errors import *  # noqa: F403 - the whole tree, as its __all__ names it
from connectors.contract.errors import __all__ as __all__
