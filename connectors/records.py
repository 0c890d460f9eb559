"""Deprecated address of `connectors.contract.records`, kept for connectors written before it.

Import the exchanged values from `connectors.contract.records` (and the error tree from
`connectors.contract.errors`); this module will be removed in a later release.
"""

from __future__ import annotations

import warnings

from connectors.contract.records import *  # noqa: F403 - every value, as its __all__ names it
from connectors.contract.records import __all__ as __all__

warnings.warn(
    "connectors.records moved to connectors.contract.records",
    DeprecationWarning,
    stacklevel=2,
)
