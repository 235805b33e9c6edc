"""``python -m embedding_equivalence``: the console script."""

from .cli import main

raise SystemExit(main())
