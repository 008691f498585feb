"""A GGUF file's metadata and tensor table, read without parsing its tokenizer arrays: the ``gguf``
package's reader builds every element of a 150k-token vocabulary as numpy views (seconds per
load); transformers' header reader skips the arrays nobody asked for. (Its table reader, not its
``GgufHeader``, which refuses the block types transformers cannot dequantize.)"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np


class GgufTensor(NamedTuple):
    """One tensor's place in the file and the numpy view of its bytes (``gguf``'s layout)."""

    name: str
    tensor_type: object  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]  # ggml order: fastest-moving dimension first
    n_bytes: int
    data_offset: int  # from the start of the file
    dtype: np.dtype  # float32 / float16 for float tensors, uint8 for blocks
    data_shape: tuple[int, ...]  # the view's shape (blocks: rows x row bytes)


def read_metadata(path: Path, arrays: tuple[str, ...] = ()) -> dict:
    """Every metadata key (arrays as their length, but for the keys in ``arrays``)."""
    from transformers.integrations.gguf.reader import read_gguf_metadata

    return read_gguf_metadata(str(path), arrays)[0]


def read_tensors(path: Path) -> list[GgufTensor]:
    import gguf
    from transformers.integrations.gguf import reader

    blob = reader._mapped(str(path))
    meta, count, pos = reader._read_metadata(blob, str(path))
    entries, pos = reader._read_tensor_table(blob, count, pos)
    alignment = meta.get("general.alignment", 32)
    start = (pos + alignment - 1) // alignment * alignment  # the data follows, aligned
    out = []
    for name, shape, ggml_type, offset in entries:  # shape in torch order
        kind = gguf.GGMLQuantizationType(ggml_type)
        block, size = gguf.GGML_QUANT_SIZES[kind]
        n_bytes = int(np.prod(shape)) * size // block
        if kind.name in ("F32", "F16"):
            dtype, view = np.dtype(np.float32 if kind.name == "F32" else np.float16), shape
        else:
            dtype, view = np.dtype(np.uint8), gguf.quant_shape_to_byte_shape(shape, kind)
        dims = tuple(int(d) for d in reversed(shape))
        out.append(GgufTensor(name, kind, dims, n_bytes, start + int(offset), dtype, tuple(view)))
    return out
