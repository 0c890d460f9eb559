"""The write path, in the order an ingest runs through it.

`ingest` of a whole source (a folder or git repository: batches, tombstones for vanished
files), `validation` against the ontology, `chunking` of text, the `writer` (system of record
first, then the derived stores through an outbox) and `consistency` (`uda check` and
`uda sync`).
"""
