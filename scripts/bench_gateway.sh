#!/usr/bin/env bash
# The gateway's added latency: `pagoda serve` with the gateway off and on (SQLite sink,
# limits and a budget that never bind), alternated PAIRS times, each driven by
# `pagoda bench serve` at RATE requests/s with 16-token prompts and max_tokens 1.
# Prints each run's end-to-end latency and the medians over the runs.
#
#   cargo build --release -p pagoda && scripts/bench_gateway.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/pagoda}
MODEL=${MODEL:-testdata/models/tiny-qwen2}
RATE=${RATE:-1000}
N=${N:-5000}
PAIRS=${PAIRS:-5}
PORT=${PORT:-8311}
OUT=${OUT:-bench-results/gateway}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/gw.toml" <<'TOML'
[pricing."tiny-qwen2"]
input = "0.50"
cached_input = "0.05"
output = "1.50"
[defaults]
requests_per_minute = 10000000
tokens_per_minute = 1000000000
max_concurrent = 100000
max_tokens = 64
budget = { daily = "1000000", monthly = "10000000" }
TOML
key=$("$BIN" keys create --gateway-db "$work/gw.db" --tenant bench 2>/dev/null)

run() {
    local mode=$1 i=$2
    local args=(serve --model "$MODEL" --served-model-name tiny-qwen2 --port "$PORT"
        --kv-cache-memory 256MiB --max-num-seqs 256)
    if [ "$mode" = on ]; then
        args+=(--gateway-db "$work/gw.db" --gateway-config "$work/gw.toml")
    fi
    RUST_LOG=warn "$BIN" "${args[@]}" 2>"$OUT/server-$mode-$i.log" &
    local pid=$!
    until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 0.1; done
    "$BIN" bench serve --base-url "http://127.0.0.1:$PORT" --model tiny-qwen2 --api-key "$key" \
        --input-len 16 --output-len 1 --request-rate "$RATE" --num-requests "$N" --warmup 500 \
        --no-progress --no-plots --out-dir "$OUT/$mode-$i" >/dev/null
    kill "$pid"
    wait "$pid" || true
    python3 - "$OUT/$mode-$i/bench.json" "$mode" "$i" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
e = r["e2e_ms"]
print(f"{sys.argv[2]:>3} run {sys.argv[3]}: {r['request_throughput']:7.1f} req/s  failed {r['failed']:4d}  "
      f"e2e p50 {e['median']:7.3f} ms  p99 {e['p99']:7.3f} ms")
PY
}

for i in $(seq 1 "$PAIRS"); do
    run off "$i"
    run on "$i"
done
python3 - "$OUT" "$PAIRS" <<'PY'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def runs(mode):
    return [json.load(open(f"{out}/{mode}-{i}/bench.json"))["runs"][0] for i in range(1, pairs + 1)]
med = lambda xs: statistics.median(xs)
off, on = runs("off"), runs("on")
for q, key in (("p50", "median"), ("p99", "p99")):
    a = med([r["e2e_ms"][key] for r in off]); b = med([r["e2e_ms"][key] for r in on])
    d = med([y["e2e_ms"][key] - x["e2e_ms"][key] for x, y in zip(off, on)])
    print(f"e2e {q}: off {a:.3f} ms, on {b:.3f} ms, added (median of pairwise differences) {d*1000:.0f} us")
print(f"throughput: off {med([r['request_throughput'] for r in off]):.1f} req/s, on {med([r['request_throughput'] for r in on]):.1f} req/s")
PY
