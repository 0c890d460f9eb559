"""The read path, in the order a search runs through it.

`contracts` (the request and result models) -> `filters` (validated against the ontology) ->
`plan` (which connectors, which pushdowns) -> `planner` (Phase 1 dense and lexical legs,
Phase 2 graph expansion, Phase 3 clearance, versions, decay and fusion) with `clearance` (THE
visibility rule), `fusion` (decay and Reciprocal Rank Fusion, pure functions) and
`graph_context` (visible edges and context paths) -> `results` (rows, Arrow and typed views)
and `explanation` (what `explain()` prints).
"""
