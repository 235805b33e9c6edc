"""``python -m embedding_equivalence.bench ARGS``, the same as ``embedding-equivalence bench``."""

from .cli import main

raise SystemExit(main())
