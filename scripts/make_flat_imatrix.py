#!/usr/bin/env python3
"""Write an importance matrix of ones for every 2-D weight of a GGUF file, in llama.cpp's
legacy imatrix layout, so llama-quantize makes the types it refuses without one (IQ1_S,
IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS) from random-weight benchmark models, which have no
text to calibrate on. Equal importance is what quantizing without a matrix assumes anyway.

    python scripts/make_flat_imatrix.py MODEL-f16.gguf OUT.dat
"""

import struct
import sys

import gguf


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(src)
    entries = [(t.name, int(t.shape[0])) for t in reader.tensors
               if len(t.shape) == 2 and t.name.endswith(".weight")]
    with open(out, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for name, cols in entries:
            raw = name.encode()
            f.write(struct.pack("<i", len(raw)) + raw)
            f.write(struct.pack("<ii", 1, cols))
            f.write(struct.pack(f"<{cols}f", *([1.0] * cols)))
        f.write(struct.pack("<i", 1))
        dataset = b"ones"
        f.write(struct.pack("<i", len(dataset)) + dataset)
    print(f"{out}: {len(entries)} entries")


if __name__ == "__main__":
    main()
