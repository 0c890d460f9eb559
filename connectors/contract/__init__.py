"""What connectors and the planner exchange, beneath both of them.

`errors` (the error tree), `predicates` (normalised filter predicates), `records` (chunks, hits,
nodes, edges and subgraphs) and `system_of_record` (stored states, clearances and the write
batch). Nothing here imports `uda`; `uda` and every connector import from here.
"""
