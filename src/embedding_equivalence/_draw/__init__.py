"""The drawing layer: what a verification draws, and nothing that runs a candidate.

The recipes of calls (``cases.py``), the strategies (``strategies.py``, which the public
``embedding_equivalence.strategies`` re-exports) and their internals for tensors, embeddings,
bags and quantized tables, the fixed boundary examples (``boundaries.py``) and the verifiers'
size knobs (``sizes.py``).
"""
