#!/usr/bin/env bash
# llama.cpp's logits for the prompts of the quantized GGUF fixtures, written beside them as
# testdata/gguf/FILE.llamacpp.json: the accuracy peer of `--quant-dot int8` in
# crates/pagoda-models/tests/gguf.rs (llama.cpp quantizes activations too).
#
#   scripts/llamacpp_logits.sh [PEER_DIR]     (default /work/peer, after scripts/peer_llamacpp.sh)
set -euo pipefail

PEER_DIR=${1:-/work/peer}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LLAMA_SRC=$(ls -d "$PEER_DIR"/llama_cpp_python-*/vendor/llama.cpp | head -n1)
BUILD=$PEER_DIR/llama-build
PROBE=$PEER_DIR/bin/llamacpp-logits

g++ -O2 -std=c++17 -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
    "$REPO_ROOT/scripts/llamacpp_logits.cpp" \
    "$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a" \
    "$BUILD/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -o "$PROBE"
COMMIT=$(sed -n 's/^#define LLAMA_COMMIT *"\(.*\)"/\1/p' "$BUILD/src/llama-version.h")

for FILE in tiny-mistral-q8_0 tiny-qwen3-q4_0 tiny-qwen2-kquants; do
    python3 - "$PROBE" "$REPO_ROOT/testdata/gguf/$FILE.gguf" "$COMMIT" <<'PY'
import json, subprocess, sys

probe, gguf, commit = sys.argv[1:]
reference = json.load(open(gguf + ".reference.json"))
prompts = "".join(" ".join(map(str, c["input_ids"])) + "\n" for c in reference["cases"])
out = subprocess.run([probe, gguf], input=prompts, capture_output=True, text=True, check=True)
rows = [[float(v) for v in line.split()] for line in out.stdout.splitlines()]
assert len(rows) == len(reference["cases"]), "one row of logits per prompt"
doc = {
    "file": reference["file"],
    "llama_cpp_commit": commit,
    # Same prompts, in the same order, as the transformers reference beside it.
    "cases": [{"last_logits": [float(f"{v:.7g}") for v in row]} for row in rows],
}
with open(gguf + ".llamacpp.json", "w") as f:
    json.dump(doc, f, separators=(",", ":"))
    f.write("\n")
print(f"{gguf}.llamacpp.json: {len(rows)} prompts, llama.cpp {commit}")
PY
done
