"""The UDA benchmark harness: quality on public data, speed on a synthetic ontology.

Run it as `python -m benchmarks --help`; see benchmarks/README.md for what each row means.
"""
