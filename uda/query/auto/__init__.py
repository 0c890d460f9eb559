"""The planner's automatic mode: settings chosen from what the store's graph looks like.

`choice` decides (a pure rule over a `GraphShape`), `shapes` keeps the shape a planner last
read. The request's explicit options and the profile's explicit weights always win.
"""

from uda.query.auto.choice import AutoChoice, AutoMode, choose
from uda.query.auto.shapes import GraphShapes

__all__ = ["AutoChoice", "AutoMode", "GraphShapes", "choose"]
