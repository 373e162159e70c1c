#!/usr/bin/env python3
"""Write crates/pagoda-models/src/quant/iq_grids.rs: the lattice codebooks of the IQ1/IQ2/IQ3
tensor types, as the `gguf` package (pip, published by llama.cpp) decodes them.

    pip install gguf numpy
    python scripts/make_iq_grids.py

Each grid row is the magnitudes of 8 (IQ2, IQ1) or 4 (IQ3) consecutive weights; a row is
written as one little-endian integer whose byte `i` is weight `i` (IQ1's -1/0/1 plus one). The file is data, generated once and committed; the test that decodes
quant-blocks.gguf bit for bit checks it.
"""

from pathlib import Path

import numpy as np
from gguf import quants

OUT = Path(__file__).resolve().parent.parent / "crates/pagoda-models/src/quant/iq_grids.rs"

GRIDS = [
    # (Rust name, gguf class, integer width in bytes, what it holds)
    ("IQ2_XXS", quants.IQ2_XXS, 8, "IQ2_XXS: 256 rows of 8 magnitudes (8, 25 or 43)"),
    ("IQ2_XS", quants.IQ2_XS, 8, "IQ2_XS: 512 rows of 8 magnitudes (8, 25 or 43)"),
    ("IQ2_S", quants.IQ2_S, 8, "IQ2_S: 1024 rows of 8 magnitudes (8, 25 or 43)"),
    ("IQ3_XXS", quants.IQ3_XXS, 4, "IQ3_XXS: 256 rows of 4 magnitudes (4 to 62)"),
    ("IQ3_S", quants.IQ3_S, 4, "IQ3_S: 512 rows of 4 magnitudes (odd, 1 to 15)"),
    ("IQ1_S", quants.IQ1_S, 8, "IQ1_S and IQ1_M: 2048 rows of 8 values `g + 1`, `g` in -1, 0, 1"),
]


def rows_as_ints(cls, width: int) -> list[int]:
    cls.init_grid()
    grid = cls.grid.reshape(cls.grid_shape).astype(np.int64)
    if cls is quants.IQ1_S:
        # Stored non-negative, so that the kernels' bytewise arithmetic never borrows.
        grid = grid + 1
    assert grid.shape[1] == width
    as_bytes = (grid & 0xFF).astype(np.uint8)
    return [int.from_bytes(bytes(row), "little") for row in as_bytes]


def main() -> None:
    lines = [
        "//! The lattice codebooks of the IQ1/IQ2/IQ3 tensor types, written by",
        "//! `scripts/make_iq_grids.py` from the `gguf` package's grids (data, not code: do not",
        "//! edit). Row `k` as a little-endian integer: byte `i` is the row's weight `i`.",
        "",
    ]
    for name, cls, width, doc in GRIDS:
        values = rows_as_ints(cls, width)
        ty = "u64" if width == 8 else "u32"
        digits = 2 * width
        per_line = 4 if width == 8 else 7
        lines.append(f"/// {doc}.")
        lines.append("#[rustfmt::skip]")
        lines.append(f"pub(super) const {name}: [{ty}; {len(values)}] = [")
        for i in range(0, len(values), per_line):
            row = ", ".join(f"0x{v:0{digits}x}" for v in values[i:i + per_line])
            lines.append(f"    {row},")
        lines.append("];")
        lines.append("")
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
