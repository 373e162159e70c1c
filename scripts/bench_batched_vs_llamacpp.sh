#!/usr/bin/env bash
# Decode of 1-3 sequences at once: alternates `pagoda bench forward --batch B` with llama.cpp's
# `llama-batched-bench -npl B` on the same GGUF file, ROUNDS times per thread count, and prints
# medians of total decode tokens/s per batch size and their ratio.
#
# usage: GGUF=FILE.gguf scripts/bench_batched_vs_llamacpp.sh [ROUNDS] [THREADS...]
#   PEER_DIR   where scripts/peer_llamacpp.sh put llama.cpp (default /work/peer)
#   BATCHES    sequences decoded at once (default "1 2 3")
#   PROMPT_LEN / GEN   prompt and generated tokens per sequence (default 128 / 64)
# Pagoda's `--quant-dot` and other settings come from the environment (PAGODA_QUANT_DOT=int8).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER_DIR=${PEER_DIR:-/work/peer}
ROUNDS=${1:-3}
shift || true
THREADS=${*:-2}
BATCHES=${BATCHES:-1 2 3}
PROMPT_LEN=${PROMPT_LEN:-128}
GEN=${GEN:-64}
: "${GGUF:?set GGUF to the file both engines read}"
PAGODA=$ROOT/target/release/pagoda
BATCHED=${LLAMA_BATCHED_BENCH:-$PEER_DIR/bin/llama-batched-bench}
(cd "$ROOT" && cargo build --release -p pagoda --quiet)

batch_args=()
for b in $BATCHES; do batch_args+=(--batch "$b"); done
samples=$(mktemp)
for t in $THREADS; do
  for r in $(seq "$ROUNDS"); do
    RAYON_NUM_THREADS=$t "$PAGODA" bench forward --model "$GGUF" "${batch_args[@]}" \
      --prompt-len "$PROMPT_LEN" --gen "$GEN" --max-batched-tokens 512 --json 2>/dev/null |
      python3 -c "
import json, sys
for line in sys.stdin:
    if line.startswith('{'):
        d = json.loads(line)
        print('pagoda', $t, d['batch'], d['decode_tokens_per_s'])" >>"$samples"
    # Its table: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ...
    "$BATCHED" -m "$GGUF" -t "$t" -c 4096 -b 2048 -ub 512 -npp "$PROMPT_LEN" -ntg "$GEN" \
      -npl "$(echo $BATCHES | tr ' ' ,)" 2>/dev/null |
      awk -F'|' -v t="$t" '$2 ~ /^ *[0-9]+ *$/ { print "llama.cpp", t, $4 + 0, $9 + 0 }' >>"$samples"
  done
done
python3 - "$samples" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for t in sorted({r[1] for r in rows}, key=int):
    for b in sorted({r[2] for r in rows if r[1] == t}, key=int):
        med = {e: statistics.median(float(r[3]) for r in rows if r[:3] == [e, t, b])
               for e in ("pagoda", "llama.cpp")}
        print(f"threads {t} batch {b}: decode pagoda {med['pagoda']:.2f} t/s, "
              f"llama.cpp {med['llama.cpp']:.2f} t/s, ratio {med['pagoda'] / med['llama.cpp']:.2f}x")
PY
rm -f "$samples"
