#!/usr/bin/env bash
# Serving comparison on the Qwen2.5-0.5B-shaped f16 model (scripts/peer_llamacpp.sh makes it):
#   1. `pagoda bench engine` in process (no HTTP),
#   2. `pagoda serve` driven by `pagoda bench serve` (HTTP + SSE),
#   3. llama.cpp's `llama-server` with 32 parallel slots, driven the same way,
# all with CONCURRENCY requests of INPUT_LEN prompt and OUTPUT_LEN output tokens.
# Results (JSON) go to OUT_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER_DIR=${PEER_DIR:-/work/peer}
OUT_DIR=${OUT_DIR:-$ROOT/target/bench-serving}
CONCURRENCY=${CONCURRENCY:-32}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
MODEL_DIR=$PEER_DIR/qwen2.5-0.5b-dummy-f16
GGUF=$PEER_DIR/qwen2.5-0.5b-dummy-f16.gguf
PAGODA=$ROOT/target/release/pagoda
PORT=${PORT:-18200}
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

bench_serve() { # PORT NAME
  "$PAGODA" bench serve --base-url "http://127.0.0.1:$1" --model "$2" --no-progress \
    --tokenizer "$MODEL_DIR/tokenizer.json" --workload random --input-len "$INPUT_LEN" \
    --output-len "$OUTPUT_LEN" --concurrency "$CONCURRENCY" --num-requests "$CONCURRENCY" \
    --warmup 1 --out-dir "$OUT_DIR/$2" --no-plots
}

echo "== pagoda bench engine (in process), load $(cut -d' ' -f1 /proc/loadavg)"
"$PAGODA" bench engine --model "$MODEL_DIR" --num-requests "$CONCURRENCY" \
  --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --max-num-seqs "$CONCURRENCY" --json | tee "$OUT_DIR/engine.json"

echo "== pagoda serve + pagoda bench serve, load $(cut -d' ' -f1 /proc/loadavg)"
"$PAGODA" serve --model "$MODEL_DIR" --port "$PORT" --served-model-name pagoda \
  --max-num-seqs "$CONCURRENCY" --max-model-len 2048 >"$OUT_DIR/pagoda-serve.log" 2>&1 &
server=$!
wait_ready "$PORT"
bench_serve "$PORT" pagoda | tee "$OUT_DIR/pagoda-serve.txt"
kill -TERM "$server"; wait "$server" || true

echo "== llama-server -np $CONCURRENCY + pagoda bench serve, load $(cut -d' ' -f1 /proc/loadavg)"
"$PEER_DIR/bin/llama-server" -m "$GGUF" --host 127.0.0.1 --port "$((PORT + 1))" -t 2 \
  -np "$CONCURRENCY" -c "$((CONCURRENCY * (INPUT_LEN + OUTPUT_LEN) * 2))" --no-webui \
  >"$OUT_DIR/llama-server.log" 2>&1 &
server=$!
wait_ready "$((PORT + 1))"
bench_serve "$((PORT + 1))" llama.cpp | tee "$OUT_DIR/llama-server.txt"
kill -TERM "$server"; wait "$server" || true
