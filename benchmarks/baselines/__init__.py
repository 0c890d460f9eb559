"""Baselines measured in the same run as UDA, on the same corpora and the same model.

- `floor`: the physical floor, in-process numpy exact search and dict adjacency.
- `siloed`: a client that queries each of UDA's stores on its own (the N+1 pattern).
- `txtai_peer`: txtai, a library with embeddings, BM25, SQL and a graph in one package.
"""
