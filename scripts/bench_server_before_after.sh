#!/usr/bin/env bash
# Server throughput and TTFT of two `pagoda` binaries on the same workload, alternated:
#   BEFORE=path/to/old/pagoda AFTER=target/release/pagoda PAIRS=3 scripts/bench_server_before_after.sh
# Workload: CONCURRENCY requests of INPUT_LEN + OUTPUT_LEN tokens arriving together
# (`pagoda bench serve --ignore-eos`), on the Qwen2.5-0.5B shape with dummy f16 weights.
# TOKENIZER_DIR holds the Qwen2 tokenizer.json (scripts/make_bench_model.py --vocab-gguf writes
# one from llama.cpp's models/ggml-vocab-qwen2.gguf, which ships in the llama-cpp-python sdist):
# `bench serve` times the first token by its first visible text, so the tokenizer must cover
# the vocabulary the dummy model samples from.
# Prints one line per run and the medians of output tokens/s and p99 TTFT.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${BEFORE:?set BEFORE to the old pagoda binary}
AFTER=${AFTER:-$ROOT/target/release/pagoda}
PAIRS=${PAIRS:-3}
CONCURRENCY=${CONCURRENCY:-32}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
PORT=${PORT:-18300}
OUT_DIR=${OUT_DIR:-$ROOT/target/bench-before-after}
MODEL_DIR=$OUT_DIR/model
TOKENIZER_DIR=${TOKENIZER_DIR:?set TOKENIZER_DIR to a directory with the Qwen2 tokenizer.json}
mkdir -p "$MODEL_DIR"
cp "$ROOT/testdata/configs/qwen2.5-0.5b/config.json" "$MODEL_DIR/"
cp "$TOKENIZER_DIR/tokenizer.json" "$TOKENIZER_DIR/tokenizer_config.json" "$MODEL_DIR/"

wait_ready() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server did not become ready" >&2
  return 1
}

run_one() { # NAME BINARY RUN
  local dir="$OUT_DIR/$1-$3"
  "$2" serve --model "$MODEL_DIR" --load-format dummy --dtype float16 --port "$PORT" \
    --served-model-name bench --max-num-seqs "$CONCURRENCY" --max-model-len 2048 \
    >"$OUT_DIR/$1-$3.log" 2>&1 &
  local server=$!
  wait_ready
  "$AFTER" bench serve --base-url "http://127.0.0.1:$PORT" --model bench --no-progress \
    --tokenizer "$MODEL_DIR/tokenizer.json" --workload random --input-len "$INPUT_LEN" \
    --output-len "$OUTPUT_LEN" --ignore-eos true --concurrency "$CONCURRENCY" \
    --num-requests "$CONCURRENCY" --warmup 1 --out-dir "$dir" --no-plots >/dev/null
  cp "$dir/bench.json" "$dir.json"
  kill -TERM "$server"; wait "$server" || true
  python3 - "$1" "$3" "$dir.json" <<'EOF'
import json, sys
name, run, path = sys.argv[1:]
r = json.load(open(path))["runs"][0]
tput = r["output_token_throughput"]
p99 = r["ttft_ms"]["p99"]
print(f"{name} run {run}: output {tput:.2f} tok/s, TTFT p99 {p99:.0f} ms")
EOF
}

for i in $(seq "$PAIRS"); do
  run_one before "$BEFORE" "$i"
  run_one after "$AFTER" "$i"
done

python3 - "$OUT_DIR" "$PAIRS" <<'EOF'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
for name in ("before", "after"):
    runs = [json.load(open(f"{out}/{name}-{i}.json"))["runs"][0] for i in range(1, pairs + 1)]
    t = statistics.median(r["output_token_throughput"] for r in runs)
    p = statistics.median(r["ttft_ms"]["p99"] for r in runs)
    print(f"median {name}: output {t:.2f} tok/s, TTFT p99 {p:.0f} ms over {pairs} runs")
EOF
