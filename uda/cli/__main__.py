"""`python -m uda.cli`: the same as the `uda` command."""

from __future__ import annotations

import sys

from uda.cli.commands import main

sys.exit(main())
