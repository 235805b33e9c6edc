"""A correct sharded candidate whose module takes 4 s to import (the first call of a rank on a
loaded machine): importing it is start-up, which a call's timeout must not bound."""

from __future__ import annotations

import time

from embedding_equivalence.distributed import vocab_parallel_embedding

#: Seconds the import takes: more than the call timeout its test gives.
IMPORT_SECONDS = 4.0
time.sleep(IMPORT_SECONDS)

__all__ = ["vocab_parallel_embedding"]
