#!/usr/bin/env bash
# Closed loop on the Qwen2.5-0.5B-shaped f16 model (scripts/peer_llamacpp.sh makes it):
# 32 requests in flight, 96 in all, 128 prompt + 128 output tokens. The first 32 arrive
# together; the rest arrive one by one as earlier ones finish, so TTFT after the first wave
# shows how each server admits new prompts while others decode. Pagoda first, then
# llama-server with 32 slots, PAIRS times (default 1) alternated; then
# scripts/ttft_after_first_wave.py summarises every run and the medians per server.
# GGUF=FILE.gguf PAGODA_MODEL=FILE.gguf makes both servers read the same (e.g. Q4_K_M) file.
# LLAMA_SERVER picks the peer's binary (default PEER_DIR/bin/llama-server), e.g. a build
# without AMX.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER_DIR=${PEER_DIR:-/work/peer}
OUT_DIR=${OUT_DIR:-$ROOT/target/steady}
MODEL_DIR=$PEER_DIR/qwen2.5-0.5b-dummy-f16
GGUF=${GGUF:-$PEER_DIR/qwen2.5-0.5b-dummy-f16.gguf}
PAGODA_MODEL=${PAGODA_MODEL:-$MODEL_DIR}
PAGODA=$ROOT/target/release/pagoda
LLAMA_SERVER=${LLAMA_SERVER:-$PEER_DIR/bin/llama-server}
PORT=${PORT:-18300}
mkdir -p "$OUT_DIR"
(cd "$ROOT" && cargo build --release -p pagoda --quiet)

wait_ready() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server on port $1 did not become ready" >&2
  return 1
}

bench() { # PORT MODEL RUN
  "$PAGODA" bench serve --base-url "http://127.0.0.1:$1" --model "$2" --no-progress \
    --tokenizer "$MODEL_DIR/tokenizer.json" --workload random --input-len 128 --output-len 128 \
    --concurrency 32 --num-requests 96 --out-dir "$OUT_DIR/$3" --no-plots >"$OUT_DIR/$3.txt"
}

PAIRS=${PAIRS:-1}
runs=()
server=""
# A failed run must not leave its server holding the port for the next one.
trap '[ -n "$server" ] && kill -TERM "$server" 2>/dev/null || true' EXIT
for pair in $(seq "$PAIRS"); do
  "$PAGODA" serve --model "$PAGODA_MODEL" --port "$PORT" --served-model-name pagoda \
    --max-num-seqs 32 --max-model-len 2048 >"$OUT_DIR/pagoda-serve.log" 2>&1 &
  server=$!
  wait_ready "$PORT"
  bench "$PORT" pagoda "pagoda-$pair"
  kill -TERM "$server"; wait "$server" || true

  "$LLAMA_SERVER" -m "$GGUF" --host 127.0.0.1 --port "$((PORT + 1))" -t 2 \
    -np 32 -c 16384 --no-webui >"$OUT_DIR/llama-server.log" 2>&1 &
  server=$!
  wait_ready "$((PORT + 1))"
  bench "$((PORT + 1))" llama.cpp "llama.cpp-$pair"
  kill -TERM "$server"; wait "$server" || true
  server=""
  runs+=("$OUT_DIR/pagoda-$pair" "$OUT_DIR/llama.cpp-$pair")
done

python3 "$ROOT/scripts/ttft_after_first_wave.py" --medians "${runs[@]}"
