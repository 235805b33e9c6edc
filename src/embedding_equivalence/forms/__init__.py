"""The implementations: the embedding as a lookup and as a matrix product, bags, and modules.

``lookup.py`` indexes the table, ``matmul.py`` multiplies a one-hot with it, ``bag.py`` does
both for ``F.embedding_bag``, ``modules.py`` wraps them as ``nn.Module``s; ``validation.py``
gives every form the same errors (``dtypes.py`` lists the dtypes accepted, ``memory.py``
refuses a dense one-hot that would not fit), ``renorm.py`` applies ``max_norm``, ``padding_idx`` and
``scale_grad_by_freq`` outside the product, and ``options.py`` states which option applies to
which bag mode. [`FORMS`][] (``registry.py``) lists them all; the package imports the
functions themselves from their modules.
"""

from .options import BAG_MODES, BAG_OPTIONS, EMBEDDING_OPTIONS, OPTION_MODES, option_applies
from .registry import FORMS, Form, form, forms

__all__ = [
    "BAG_MODES",
    "BAG_OPTIONS",
    "EMBEDDING_OPTIONS",
    "FORMS",
    "OPTION_MODES",
    "Form",
    "form",
    "forms",
    "option_applies",
]
