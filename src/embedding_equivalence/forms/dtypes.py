"""The dtypes of ids and tables, and how every message, test id and ``--dtypes`` names them.

One list each: the index dtypes that ``F.embedding`` accepts, the floating dtypes that the
verifiers draw (in shrinking order), and the integer dtypes of a table that a lookup reads
forward only. [`dtype_name`][] is the one way a dtype is written for a reader.
"""

from __future__ import annotations

import torch

#: Index dtypes accepted by ``F.embedding`` (and so by every implementation here).
INDEX_DTYPES: tuple[torch.dtype, ...] = (torch.int64, torch.int32)
#: The floating dtypes of tables, in shrinking order (float32 first): what the verifiers draw,
#: the CLI's ``--dtypes`` names and the pytest plugin's rows.
FLOAT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
)


def dtype_name(dtype: torch.dtype) -> str:
    """How messages, test ids and ``--dtypes`` name a dtype: ``"float32"``."""
    return str(dtype).removeprefix("torch.")


#: [`FLOAT_DTYPES`][] by [`dtype_name`][]: what ``dtypes=[...]`` and ``--dtypes`` accept.
FLOAT_DTYPE_NAMES: dict[str, torch.dtype] = {dtype_name(d): d for d in FLOAT_DTYPES}
#: Integer table dtypes that torch's embedding looks up (forward only).
INTEGER_TABLE_DTYPES: tuple[torch.dtype, ...] = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
)
