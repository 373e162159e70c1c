#!/usr/bin/env bash
# Alternates `pagoda bench forward` and llama.cpp's `llama-bench` on the same f16 weights,
# ROUNDS times per thread count, and prints every sample plus medians. Absolute times on a
# shared 2-core machine drift; the ratio of medians taken side by side is what to quote.
#
# usage: scripts/bench_vs_llamacpp.sh [ROUNDS] [THREADS...]
#   PEER_DIR   where scripts/peer_llamacpp.sh put llama.cpp and the model (default /work/peer)
#   PROMPT_LEN / GEN   prompt tokens and generated tokens (default 512 / 64)
#   GGUF          the file llama.cpp reads; PAGODA_MODEL=$GGUF makes Pagoda read it too
#   LLAMA_BENCH   the llama-bench binary (default PEER_DIR/bin/llama-bench), e.g. an AVX2-only
#                 build to compare with PAGODA_KERNELS=avx2
# Pagoda decodes after its prompt, so llama.cpp's decode runs at the same depth
# (`llama-bench -d PROMPT_LEN`), and its prefill as a separate run. Each side times one run
# after one untimed warm-up (`llama-bench -r 1` and `bench forward`'s default `--warmup 1`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER_DIR=${PEER_DIR:-/work/peer}
ROUNDS=${1:-3}
shift || true
THREADS=${*:-2}
PROMPT_LEN=${PROMPT_LEN:-512}
GEN=${GEN:-64}
MODEL_DIR=$PEER_DIR/qwen2.5-0.5b-dummy-f16
GGUF=${GGUF:-$PEER_DIR/qwen2.5-0.5b-dummy-f16.gguf}
# The same GGUF file for both (e.g. a Q8_0 one): PAGODA_MODEL=$GGUF
PAGODA_MODEL=${PAGODA_MODEL:-$MODEL_DIR}
PAGODA=$ROOT/target/release/pagoda
LLAMA_BENCH=${LLAMA_BENCH:-$PEER_DIR/bin/llama-bench}
(cd "$ROOT" && cargo build --release -p pagoda --quiet)

samples=$(mktemp)
for t in $THREADS; do
  for r in $(seq "$ROUNDS"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    RAYON_NUM_THREADS=$t "$PAGODA" bench forward --model "$PAGODA_MODEL" --batch 1 \
      --prompt-len "$PROMPT_LEN" --gen "$GEN" --max-batched-tokens "$PROMPT_LEN" --json 2>/dev/null |
      python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('pagoda', $t, $r, '$load', d['prefill_tokens_per_s'], d['decode_tokens_per_s'])" >>"$samples"
    load=$(cut -d' ' -f1 /proc/loadavg)
    pp=$("$LLAMA_BENCH" -m "$GGUF" -t "$t" -p "$PROMPT_LEN" -n 0 -r 1 -o json 2>/dev/null |
      python3 -c "import json,sys; print(json.load(sys.stdin)[0]['avg_ts'])")
    tg=$("$LLAMA_BENCH" -m "$GGUF" -t "$t" -p 0 -n "$GEN" -d "$PROMPT_LEN" -r 1 -o json 2>/dev/null |
      python3 -c "import json,sys; print(json.load(sys.stdin)[0]['avg_ts'])")
    echo "llama.cpp $t $r $load $pp $tg" >>"$samples"
  done
done
python3 - "$samples" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"{'engine':10} {'thr':>3} {'round':>5} {'load':>5} {'prefill t/s':>12} {'decode t/s':>11}")
for e, t, r, load, pp, tg in rows:
    print(f"{e:10} {t:>3} {r:>5} {load:>5} {float(pp):12.1f} {float(tg):11.2f}")
print()
for t in sorted({r[1] for r in rows}):
    med = {}
    for e in ("pagoda", "llama.cpp"):
        sel = [r for r in rows if r[0] == e and r[1] == t]
        med[e] = (statistics.median(float(r[4]) for r in sel), statistics.median(float(r[5]) for r in sel))
        print(f"median {e:10} threads {t}: prefill {med[e][0]:.1f} t/s, decode {med[e][1]:.2f} t/s")
    print(f"speed ratio pagoda/llama.cpp, threads {t}: prefill {med['pagoda'][0]/med['llama.cpp'][0]:.2f}x, decode {med['pagoda'][1]/med['llama.cpp'][1]:.2f}x")
PY
rm -f "$samples"
