"""The read path, in the order a search runs through it.

`contracts` (the request and result models) -> `filters` (the grammar, validated against the
ontology; relation paths) -> `plan` (which connectors, which pushdowns) -> `planner` (Phase 1
dense and lexical legs, Phase 2 graph expansion, Phase 3 clearance, versions and ranking),
with `clearance` (THE visibility rule), `ranking` and `fusion` (decay, leg ranks, centrality
and Reciprocal Rank Fusion: pure functions), `graph_context` (visible edges and context
paths) and `concurrency` (cancel-safe fan-out) -> `rows` (stored states as rows of the
result schema) -> `results` (Arrow, typed elements) and `explanation` (what `explain()`
prints).
"""
