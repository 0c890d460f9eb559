"""Calibration on the store's own data (`uda tune`): no labels, no language model.

`pseudo` builds questions from the store, `measure` runs them against the candidate
settings and chooses, `settings` is what is recorded in the store and read back by the
planner, and `stored` keeps it current in a long-running client. ADR 38 says why only the
associative mode's PageRank weight is tuned.
"""

from uda.tuning.settings import Tuning

__all__ = ["Tuning"]
