"""`uda tune`: choose the associative mode's PageRank weight on the store's own data.

Prints what was measured and what was chosen (or JSON with `--format json`), with a
progress bar on a terminal; `--dry-run` records nothing. `uda stats` shows the recorded
choice, `uda search --explain` whether a search used it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from uda.cli.exits import EXIT_OK
from uda.errors import NothingToTuneError
from uda.tuning import Tuning
from uda.tuning.measure import GRID, MIN_QUERIES
from uda.tuning.run import DEFAULT_QUERIES, MAX_QUERIES

DESCRIPTION = f"""\
Build pseudo-queries from the store (a sentence of a document, answered by a document
that shares an entity or a link with it; the first is withheld from the answer), measure
the PageRank weights {", ".join(f"{w:g}" for w in GRID)} on them, and record the weight
that wins on half of the queries and is confirmed on the other half. Searches in the
associative mode then use it, below the profile's [search.weights] and the request's own.
No labels and no language model are needed; it takes seconds to a few minutes.
"""


def add_tune_parser(commands: Any) -> None:
    """`uda tune` and its options."""
    tune = commands.add_parser(
        "tune",
        help="choose the graph's weight on this store's own data (no labels needed)",
        description=DESCRIPTION,
        epilog="examples:\n  uda tune\n  uda tune --dry-run --format json\n"
        "  uda tune --queries 400 --seed 7\n  uda tune --reset",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tune.add_argument(
        "--queries",
        type=int,
        default=DEFAULT_QUERIES,
        help=f"pseudo-queries to build ({MIN_QUERIES} to {MAX_QUERIES}; default {DEFAULT_QUERIES})",
    )
    tune.add_argument(
        "--seed", type=int, default=0, help="which pseudo-queries (same seed, same choice)"
    )
    tune.add_argument("--dry-run", action="store_true", help="measure and choose; record nothing")
    tune.add_argument(
        "--reset",
        action="store_true",
        help="forget the recorded weight: searches use the mode's own again",
    )
    tune.add_argument("--format", choices=["text", "json"], default="text")


def run_tune(client: Any, args: argparse.Namespace) -> int:
    """Run `uda tune` on `client`'s store."""
    from tqdm import tqdm

    if args.reset:
        client.forget_tuning()
        print("tuning forgotten: the associative mode uses its own PageRank weight again")
        return EXIT_OK
    bar = tqdm(unit="search", desc="tune", file=sys.stderr, disable=not sys.stderr.isatty())

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        tuning: Tuning = client.tune(
            queries=args.queries, seed=args.seed, dry_run=args.dry_run, progress=progress
        )
    except NothingToTuneError as exc:
        # Not a mistake: a store with little graph keeps the mode's own weight.
        if args.format == "json":
            print(json.dumps({"recorded": False, "reason": str(exc)}, indent=2))
        else:
            print(f"nothing to tune: {exc}")
        return EXIT_OK
    finally:
        bar.close()
    if args.format == "json":
        print(json.dumps({**tuning.to_dict(), "recorded": not args.dry_run}, indent=2))
        return EXIT_OK
    print(render(tuning, recorded=not args.dry_run))
    mode = client.stats()["graph"]["auto_mode"]
    if mode != "associative":
        print(
            f"note: the automatic mode chooses `{mode}` for this store's graph today; the "
            "weight applies to searches in the associative mode (docs/adr/0036)"
        )
    return EXIT_OK


def render(tuning: Tuning, *, recorded: bool) -> str:
    """What was measured and chosen, as a small table."""
    halves = list(tuning.recall)
    weights = list(tuning.recall[halves[0]]) if halves else []
    lines = [f"{'weight':>8} " + " ".join(f"{h:>8}" for h in halves)]
    for weight in weights:
        cells = " ".join(f"{tuning.recall[h][weight]:8.3f}" for h in halves)
        lines.append(f"{weight:>8} {cells}")
    verb = "recorded" if recorded else "not recorded (--dry-run)"
    lines += [
        f"Recall@5 of the second hop on {tuning.queries} pseudo-queries (half choose, "
        "half confirm).",
        f"PageRank weight {tuning.centrality_weight:g} (the mode's own: "
        f"{tuning.default_weight:g}), {verb}: {tuning.reason}.",
    ]
    return "\n".join(lines)


def summary(value: object) -> str:
    """The `tuning` line of `uda stats`."""
    if not isinstance(value, dict):
        return "not tuned (run `uda tune`)"
    tuning = Tuning.from_json(json.dumps({"version": 1, **value}))
    return "unreadable" if tuning is None else tuning.describe()


__all__ = ["add_tune_parser", "render", "run_tune", "summary"]
