#!/usr/bin/env bash
# Latency under load, side by side with llama.cpp (issue 16), on the Qwen2.5-0.5B-shaped f16
# model (scripts/peer_llamacpp.sh makes it): Poisson arrivals of INPUT_LEN + OUTPUT_LEN-token
# requests to `pagoda serve` and to `llama-server -np 32`, both driven by `pagoda bench serve`.
#
#   1. llama.cpp's maximum rate: a closed loop of 32 in flight (skipped when RATE is given);
#   2. PAIRS alternated pairs (Pagoda first) of open-loop runs at RATE (default 70% of that
#      maximum), NUM_REQUESTS each, same seed per pair for both servers;
#   3. (SEARCH=1) `bench profile --slo-ttft-ms --slo-itl-ms` on each server: the highest rate
#      at which >= 90% of requests meet TTFT <= SLO_TTFT_MS and TPOT <= SLO_ITL_MS.
# Then prints every run and the medians. Results (JSON) go to OUT_DIR.
#
#   PAGODA_FLAGS   extra `pagoda serve` flags, e.g. "--target-itl-ms 250" (default: none)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER_DIR=${PEER_DIR:-/work/peer}
OUT_DIR=${OUT_DIR:-$ROOT/target/goodput}
MODEL_DIR=$PEER_DIR/qwen2.5-0.5b-dummy-f16
GGUF=$PEER_DIR/qwen2.5-0.5b-dummy-f16.gguf
PAGODA=$ROOT/target/release/pagoda
PORT=${PORT:-18400}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
SLO_TTFT_MS=${SLO_TTFT_MS:-2000}
SLO_ITL_MS=${SLO_ITL_MS:-300}
PAGODA_FLAGS=${PAGODA_FLAGS:-}
PAIRS=${PAIRS:-3}
NUM_REQUESTS=${NUM_REQUESTS:-48}
RATE=${RATE:-}
SEARCH=${SEARCH:-1}
RATE_MIN=${RATE_MIN:-0.15}
RATE_MAX=${RATE_MAX:-0.4}
SEARCH_STEPS=${SEARCH_STEPS:-2}
SEARCH_REQUESTS=${SEARCH_REQUESTS:-32}
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

server=""
# A failed run must not leave its server holding the port for the next one.
trap '[ -n "$server" ] && kill -TERM "$server" 2>/dev/null || true' EXIT
start() { # pagoda|llama.cpp
  if [ "$1" = pagoda ]; then
    # shellcheck disable=SC2086
    "$PAGODA" serve --model "$MODEL_DIR" --port "$PORT" --served-model-name pagoda \
      --max-num-seqs 32 --max-model-len 2048 $PAGODA_FLAGS >>"$OUT_DIR/pagoda-serve.log" 2>&1 &
  else
    "$PEER_DIR/bin/llama-server" -m "$GGUF" --host 127.0.0.1 --port "$PORT" -t 2 \
      -np 32 -c 16384 --no-webui >>"$OUT_DIR/llama-server.log" 2>&1 &
  fi
  server=$!
  wait_ready "$PORT"
}
stop() { kill -TERM "$server"; wait "$server" || true; server=""; }
endpoint() { # MODEL
  echo --base-url "http://127.0.0.1:$PORT" --model "$1" --no-progress \
    --tokenizer "$MODEL_DIR/tokenizer.json" --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN"
}

if [ -z "$RATE" ]; then
  echo "== llama.cpp's maximum: closed loop, 32 in flight, load $(cut -d' ' -f1 /proc/loadavg)"
  start llama.cpp
  # shellcheck disable=SC2046
  "$PAGODA" bench serve $(endpoint llama.cpp) --concurrency 32 --num-requests 64 \
    --out-dir "$OUT_DIR/llama.cpp-max" --no-plots >"$OUT_DIR/llama.cpp-max.txt"
  stop
  RATE=$(python3 -c "import json; r=json.load(open('$OUT_DIR/llama.cpp-max/bench.json'))['runs'][0]; print(round(0.7*r['request_throughput'], 3))")
  echo "llama.cpp closed-loop maximum $(python3 -c "import json; print(round(json.load(open('$OUT_DIR/llama.cpp-max/bench.json'))['runs'][0]['request_throughput'], 3))") req/s; open-loop rate $RATE req/s"
fi

runs=()
for pair in $(seq "$PAIRS"); do
  for name in pagoda llama.cpp; do
    echo "== pair $pair: $name at $RATE req/s, load $(cut -d' ' -f1 /proc/loadavg)"
    start "$name"
    # shellcheck disable=SC2046
    "$PAGODA" bench serve $(endpoint "$name") --request-rate "$RATE" \
      --num-requests "$NUM_REQUESTS" --seed "$pair" --slo-ttft-ms "$SLO_TTFT_MS" \
      --slo-tpot-ms "$SLO_ITL_MS" --out-dir "$OUT_DIR/$name-$pair" --no-plots \
      >"$OUT_DIR/$name-$pair.txt"
    stop
    runs+=("$OUT_DIR/$name-$pair/bench.json")
  done
done

searches=()
if [ "$SEARCH" = 1 ]; then
  for name in pagoda llama.cpp; do
    echo "== goodput search: $name, load $(cut -d' ' -f1 /proc/loadavg)"
    start "$name"
    # shellcheck disable=SC2046
    "$PAGODA" bench profile $(endpoint "$name") --slo-ttft-ms "$SLO_TTFT_MS" \
      --slo-itl-ms "$SLO_ITL_MS" --rate-min "$RATE_MIN" --rate-max "$RATE_MAX" \
      --search-steps "$SEARCH_STEPS" --num-requests "$SEARCH_REQUESTS" --warmup 2 \
      --out-dir "$OUT_DIR/search-$name" >"$OUT_DIR/search-$name.txt" || true
    stop
    searches+=("$OUT_DIR/search-$name/goodput_search.json")
  done
fi

python3 - "$RATE" "${#runs[@]}" "${runs[@]}" "${searches[@]}" <<'PY'
import json, os, statistics, sys
rate, n = sys.argv[1], int(sys.argv[2])
runs, searches = sys.argv[3:3 + n], sys.argv[3 + n:]
rows = {}
print(f"open loop at {rate} req/s")
print(f"{'run':14} {'out tok/s':>9} {'TTFT p50':>9} {'TTFT p99':>9} {'ITL p99':>8} {'TPOT p99':>9} {'attained':>8}")
for path in runs:
    name = os.path.basename(os.path.dirname(path))
    r = json.load(open(path))["runs"][0]
    row = (r["output_token_throughput"], r["ttft_ms"]["median"], r["ttft_ms"]["p99"],
           r["itl_ms"]["p99"], r["tpot_ms"]["p99"], r["good_requests"] / max(r["requests"], 1))
    rows.setdefault(name.rsplit("-", 1)[0], []).append(row)
    print(f"{name:14} {row[0]:9.1f} {row[1]:9.0f} {row[2]:9.0f} {row[3]:8.0f} {row[4]:9.0f} {row[5]:8.2f}")
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
for k, m in med.items():
    print(f"median {k:9} {m[0]:9.1f} {m[1]:9.0f} {m[2]:9.0f} {m[3]:8.0f} {m[4]:9.0f} {m[5]:8.2f}")
if "pagoda" in med and "llama.cpp" in med:
    p, l = med["pagoda"], med["llama.cpp"]
    print(f"pagoda/llama.cpp: throughput {p[0]/l[0]:.2f}x, TTFT p99 {p[2]/l[2]:.2f}x, ITL p99 {p[3]/l[3]:.2f}x")
answers = {}
for path in searches:
    name = os.path.basename(os.path.dirname(path)).removeprefix("search-")
    if not os.path.exists(path):
        print(f"goodput search {name}: no answer (even the lowest rate missed the SLO; see its .txt)")
        continue
    a = json.load(open(path))["answer"]
    answers[name] = a["max_rate"]
    print(f"goodput search {name}: max rate {a['max_rate']:.3f} req/s, goodput {a['goodput']:.3f}, missed at {a.get('lowest_missed_rate')}")
if len(answers) == 2 and answers["llama.cpp"] > 0:
    print(f"goodput ratio pagoda/llama.cpp: {answers['pagoda']/answers['llama.cpp']:.2f}x")
PY
