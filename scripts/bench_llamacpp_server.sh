#!/usr/bin/env bash
# Benchmark llama.cpp's OpenAI-compatible server (from llama-cpp-python[server]) with
# `pagoda bench serve`, as a check of the bench client against a real peer.
#
# Usage: scripts/bench_llamacpp_server.sh [MODEL.gguf] [extra `bench serve` flags...]
#
# Without MODEL.gguf a tiny random llama model (2 layers, width 64) is written with the
# `gguf` package: its text is noise, but the server does real tokenization, prefill,
# decode and streaming, which is what the client needs to be checked against.
#
# Environment:
#   VENV          virtualenv to install into (default target-bench/llamacpp-venv)
#   LLAMA_SDIST   install llama-cpp-python from this local sdist instead of the registry
#   LLAMA_SERVER_BIN  use this llama.cpp `llama-server` binary instead of installing
#                 llama-cpp-python (same engine, its C++ HTTP front end)
#   PORT          server port on 127.0.0.1 (default 8089)
#   OUT_DIR       results folder (default target-bench/llamacpp-bench)
#   BENCH_FLAGS   default load flags (see below)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/target-bench/llamacpp-venv}
PORT=${PORT:-8089}
OUT_DIR=${OUT_DIR:-$ROOT/target-bench/llamacpp-bench}
BENCH_FLAGS=${BENCH_FLAGS:---concurrency 1,2,4 --num-requests 16 --warmup 2 --input-len 64 --output-len 32}
MODEL=${1:-}
shift || true
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-bench}

log() { echo "[bench_llamacpp] $*" >&2; }

install_server() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV"
    fi
    "$VENV/bin/python" -c 'import gguf, numpy' 2>/dev/null \
        || "$VENV/bin/pip" install --quiet gguf numpy
    if [ -n "${LLAMA_SERVER_BIN:-}" ] \
        || "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
        return
    fi
    log "installing llama-cpp-python[server] (builds llama.cpp from source, ~10 min on 2 cores)"
    local spec="llama-cpp-python[server]"
    if [ -n "${LLAMA_SDIST:-}" ]; then
        spec="${LLAMA_SDIST}[server]"
    fi
    # CPU-only build; override CMAKE_ARGS for other backends.
    CMAKE_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=ON} "$VENV/bin/pip" install --quiet "$spec"
}

write_tiny_model() {
    local path=$1
    log "writing a tiny random llama model to $path"
    "$VENV/bin/python" - "$path" <<'PY'
import sys
import numpy as np
import gguf

path = sys.argv[1]
rng = np.random.default_rng(0)
embd, layers, heads, ff, ctx = 64, 2, 4, 128, 2048

# A SentencePiece-style vocabulary: control tokens, the 256 byte-fallback tokens (so any
# text tokenizes), then common words.
words = ("the of and to in is it you that he was for on are with as his they be at one "
         "have this from or had by word but what some we can out other were all there when "
         "up use your how said an each she which do their time if will way about many then "
         "them write would like so these her long make thing see him two has look more day "
         "could go come did number sound no most people my over know water than call first "
         "who may down side been now find tok").split()
# SentencePiece merges pieces pairwise, so every prefix of every word is in the vocabulary
# too; longer pieces score higher and win.
pieces = []
for word in words:
    piece = "\u2581" + word
    for end in range(1, len(piece) + 1):
        if piece[:end] not in pieces:
            pieces.append(piece[:end])
for ch in sorted(set("".join(words))):
    if ch not in pieces:
        pieces.append(ch)
tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + pieces
types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
scores = [0.0] * 259 + [float(len(p)) for p in pieces]

writer = gguf.GGUFWriter(path, "llama")
writer.add_name("pagoda-bench tiny random llama")
writer.add_context_length(ctx)
writer.add_embedding_length(embd)
writer.add_block_count(layers)
writer.add_feed_forward_length(ff)
writer.add_head_count(heads)
writer.add_head_count_kv(heads)
writer.add_rope_dimension_count(embd // heads)
writer.add_layer_norm_rms_eps(1e-5)
writer.add_tokenizer_model("llama")
writer.add_token_list(tokens)
writer.add_token_scores(scores)
writer.add_token_types(types)
writer.add_bos_token_id(1)
writer.add_eos_token_id(2)
writer.add_unk_token_id(0)

def weight(*shape):
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)

vocab = len(tokens)
# numpy shapes are the reverse of GGML's ne order: (rows = outputs, cols = inputs).
writer.add_tensor("token_embd.weight", weight(vocab, embd))
writer.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
writer.add_tensor("output.weight", weight(vocab, embd))
for i in range(layers):
    writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.{i}.{name}.weight", weight(embd, embd))
    writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(embd, dtype=np.float32))
    writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ff, embd))
    writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(ff, embd))
    writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(embd, ff))
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
PY
}

install_server
mkdir -p "$OUT_DIR"
if [ -z "$MODEL" ]; then
    MODEL=$OUT_DIR/tiny-random-llama.gguf
    [ -f "$MODEL" ] || write_tiny_model "$MODEL"
fi

log "building pagoda"
cargo build --release -p pagoda --quiet
BENCH=$CARGO_TARGET_DIR/release/pagoda

if [ -n "${LLAMA_SERVER_BIN:-}" ]; then
    log "starting $LLAMA_SERVER_BIN on 127.0.0.1:$PORT with $MODEL"
    "$LLAMA_SERVER_BIN" --model "$MODEL" --alias tiny --host 127.0.0.1 --port "$PORT" \
        --ctx-size 2048 --parallel 4 >"$OUT_DIR/server.log" 2>&1 &
else
    log "starting llama_cpp.server on 127.0.0.1:$PORT with $MODEL"
    # By default a new request interrupts the one being streamed (ending it early, often
    # with no content); queue them instead so concurrency levels measure queueing.
    "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias tiny \
        --host 127.0.0.1 --port "$PORT" --n_ctx 2048 --n_batch 512 \
        --interrupt_requests False \
        >"$OUT_DIR/server.log" 2>&1 &
fi
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT

for _ in $(seq 1 120); do
    if curl --silent --fail --noproxy '*' "http://127.0.0.1:$PORT/v1/models" >/dev/null; then
        break
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        log "server exited; see $OUT_DIR/server.log"
        tail -20 "$OUT_DIR/server.log" >&2
        exit 1
    fi
    sleep 1
done
curl --silent --fail --noproxy '*' "http://127.0.0.1:$PORT/v1/models" >/dev/null \
    || { log "server not ready after 120 s"; exit 1; }

log "running pagoda bench serve"
# shellcheck disable=SC2086
"$BENCH" bench serve --base-url "http://127.0.0.1:$PORT" --model tiny \
    --out-dir "$OUT_DIR" $BENCH_FLAGS "$@"
