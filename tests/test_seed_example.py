"""The worked example of the seed notebook ``shared/seeds/002_f71e86774d60ee6a.txt``.

The notebook seeds torch with 123, creates ``nn.Embedding(4, 5)``, prints its weight, looks up
``idx = [2, 3, 1]`` and prints the rows, then shows that ``nn.Linear`` on the one-hot (with the
embedding's weight transposed) prints the same rows. Here every form of the package must print
them too.

The expected numbers are never retyped: they are parsed from ``tests/data/seed_002_tables.txt``,
a verbatim copy of the notebook's printed tables, and when the seed file itself is present the
copy is checked against it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from embedding_equivalence import (
    MatmulEmbedding,
    embedding_to_linear,
    linear_embedding,
    lookup_embedding,
    matmul_embedding,
    sparse_matmul_embedding,
)
from embedding_equivalence.forms.matmul import dense_one_hot

SEED_FILE = Path(__file__).parents[2] / "shared" / "seeds" / "002_f71e86774d60ee6a.txt"
TABLES_FILE = Path(__file__).parent / "data" / "seed_002_tables.txt"

IDX = [2, 3, 1]
NUM_IDX = 4  # the notebook's num_idx = max(idx) + 1
OUT_DIM = 5
SEED = 123

#: The printed blocks, in the order of the notebook, with the header line that starts each one
#: in the fixture file and the regular expression that finds it in the seed file.
BLOCKS = {
    "weight": (
        "## embedding.weight",
        r"Parameter containing:\ntensor\(\[\[.*?\]\], requires_grad=True\)",
    ),
    "rows": (
        "## embedding(idx)",
        r"In \[8\]:.*?\n(tensor\(\[\[.*?grad_fn=<EmbeddingBackward0>\))",
    ),
    "one_hot": (
        "## torch.nn.functional.one_hot(idx)",
        r"In \[12\]:.*?\n(tensor\(\[\[.*?\]\]\))",
    ),
}


def fixture_blocks() -> dict[str, str]:
    """The blocks of ``tests/data/seed_002_tables.txt``, keyed like :data:`BLOCKS`."""
    chunks = re.split(r"^(?=## )", TABLES_FILE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    body = [c for c in chunks if c.startswith("## ")]
    assert len(body) == len(BLOCKS)
    blocks = {}
    for (name, (header, _pattern)), chunk in zip(BLOCKS.items(), body, strict=True):
        first_line, _, text = chunk.partition("\n")
        assert first_line.startswith(header), (first_line, header)
        blocks[name] = text.strip("\n")
    return blocks


def seed_blocks(text: str) -> dict[str, str]:
    """The same blocks, found by regular expression in the seed notebook's text."""
    blocks = {}
    for name, (_header, pattern) in BLOCKS.items():
        match = re.search(pattern, text, flags=re.DOTALL)
        assert match is not None, f"{name}: {pattern!r} not found in {SEED_FILE}"
        blocks[name] = match.group(match.lastindex or 0)
    return blocks


def parse_table(block: str, dtype: torch.dtype) -> torch.Tensor:
    """Parse the rows ``[a, b, ...]`` of a printed 2-D tensor."""
    rows = re.findall(r"\[([^\[\]]+)\]", block)
    return torch.tensor([[float(x) for x in row.split(",")] for row in rows], dtype=dtype)


@pytest.fixture(scope="module")
def tables() -> dict[str, torch.Tensor]:
    blocks = fixture_blocks()
    return {
        "weight": parse_table(blocks["weight"], torch.float32),
        "rows": parse_table(blocks["rows"], torch.float32),
        "one_hot": parse_table(blocks["one_hot"], torch.int64),
    }


def seeded_embedding(cls: type[nn.Module] = nn.Embedding) -> nn.Module:
    """``cls(4, 5)`` after ``torch.manual_seed(123)``, without touching the global RNG state."""
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        return cls(NUM_IDX, OUT_DIM)


def rounded(t: torch.Tensor) -> torch.Tensor:
    """Round to the 4 decimals the notebook prints."""
    return torch.round(t.detach(), decimals=4)


# --------------------------------------------------------------------------------------------
# The fixture file is the seed's own output


def test_fixture_file_matches_the_seed_file() -> None:
    if not SEED_FILE.exists():
        pytest.skip(f"seed notebook not present at {SEED_FILE}; the fixture copy is used alone")
    text = SEED_FILE.read_text(encoding="utf-8")
    ours = fixture_blocks()
    assert seed_blocks(text) == ours
    for block in ours.values():
        assert block in text


def test_parsed_tables_have_the_printed_shapes(tables: dict[str, torch.Tensor]) -> None:
    assert tables["weight"].shape == (NUM_IDX, OUT_DIM)
    assert tables["rows"].shape == (len(IDX), OUT_DIM)
    assert tables["one_hot"].shape == (len(IDX), NUM_IDX)
    assert tables["weight"][3, 0] == torch.tensor(-2.84)  # spot check of the parser


# --------------------------------------------------------------------------------------------
# The printed weight, one-hot and rows


def test_seeded_embedding_weight_is_the_printed_table(tables: dict[str, torch.Tensor]) -> None:
    embedding = seeded_embedding()
    assert torch.equal(rounded(embedding.weight), tables["weight"])


def test_seeded_matmul_embedding_weight_is_the_printed_table(
    tables: dict[str, torch.Tensor],
) -> None:
    matmul = seeded_embedding(MatmulEmbedding)
    assert torch.equal(rounded(matmul.weight), tables["weight"])
    assert torch.equal(matmul.weight, seeded_embedding().weight)


def test_printed_rows_are_the_weight_rows(tables: dict[str, torch.Tensor]) -> None:
    assert torch.equal(tables["rows"], tables["weight"][IDX])


def test_one_hot_is_the_printed_one(tables: dict[str, torch.Tensor]) -> None:
    idx = torch.tensor(IDX)
    assert torch.equal(F.one_hot(idx), tables["one_hot"])
    assert torch.equal(dense_one_hot(idx, NUM_IDX, torch.float32), tables["one_hot"].float())


def _notebook_linear(embedding: nn.Embedding, idx: torch.Tensor) -> torch.Tensor:
    """The notebook's In [16]-[18]: a bias-free Linear given the embedding's weight transposed."""
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        linear = nn.Linear(NUM_IDX, OUT_DIM, bias=False)
    linear.weight = nn.Parameter(embedding.weight.T.detach())
    return linear(F.one_hot(idx.long()).float())  # one_hot takes int64 only


FORMS: list[object] = [
    pytest.param(lambda e, idx: e(idx), id="nn.Embedding"),
    pytest.param(lambda e, idx: lookup_embedding(idx, e.weight), id="lookup_embedding"),
    pytest.param(lambda e, idx: matmul_embedding(idx, e.weight), id="matmul_embedding"),
    pytest.param(lambda e, idx: linear_embedding(idx, e.weight), id="linear_embedding"),
    pytest.param(
        lambda e, idx: sparse_matmul_embedding(idx, e.weight), id="sparse_matmul_embedding"
    ),
    pytest.param(
        lambda e, idx: seeded_embedding(MatmulEmbedding)(idx), id="MatmulEmbedding_seeded"
    ),
    pytest.param(
        lambda e, idx: MatmulEmbedding.from_pretrained(e.weight.detach())(idx),
        id="MatmulEmbedding_from_pretrained",
    ),
    pytest.param(
        lambda e, idx: embedding_to_linear(e)(F.one_hot(idx.long(), NUM_IDX).float()),
        id="embedding_to_linear_on_one_hot",
    ),
    pytest.param(_notebook_linear, id="notebook_linear"),
]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_prints_the_rows(
    form: Callable[[nn.Embedding, torch.Tensor], torch.Tensor],
    tables: dict[str, torch.Tensor],
    index_dtype: torch.dtype,
) -> None:
    embedding = seeded_embedding()
    assert isinstance(embedding, nn.Embedding)
    idx = torch.tensor(IDX, dtype=index_dtype)
    out = form(embedding, idx)
    assert out.shape == (len(IDX), OUT_DIM)
    assert torch.equal(rounded(out), tables["rows"])
    assert torch.equal(out, embedding(idx))  # and bit for bit, not only to 4 decimals


@pytest.mark.parametrize("row", [1, 2], ids=["idx1", "idx2"])
def test_single_id_lookups_of_the_notebook(row: int, tables: dict[str, torch.Tensor]) -> None:
    # In [6] and In [7]: embedding(torch.tensor([1])) and embedding(torch.tensor([2])).
    embedding = seeded_embedding()
    ids = torch.tensor([row])
    assert torch.equal(rounded(matmul_embedding(ids, embedding.weight)), tables["weight"][[row]])
    assert torch.equal(matmul_embedding(ids, embedding.weight), embedding(ids))
