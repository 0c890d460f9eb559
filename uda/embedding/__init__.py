"""Embedders beyond the default sentence-transformers one (`uda.embedder`).

`onnx`: the same model run by ONNX Runtime, exported once into a cache keyed by the weights'
fingerprint (docs/adr/0027-onnx-embedder.md).
"""
