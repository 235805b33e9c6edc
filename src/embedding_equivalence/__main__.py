"""``python -m embedding_equivalence``: the console script."""

from ._cli.main import main

raise SystemExit(main())
