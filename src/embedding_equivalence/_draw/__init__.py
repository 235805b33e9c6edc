"""The drawing layer: what a verification draws, and nothing that runs a candidate.

The recipes of calls (``cases.py``), the strategies' internals for tensors, embeddings, bags
and quantized tables, the fixed boundary examples (``boundaries.py``) and the verifiers' size
knobs (``sizes.py``).
"""
