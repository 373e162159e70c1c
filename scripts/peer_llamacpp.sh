#!/usr/bin/env bash
# Prepare llama.cpp as the speed peer for Pagoda benchmarks.
#
#   scripts/peer_llamacpp.sh [PEER_DIR]        (default: /work/peer)
#
# Steps, each skipped when its output already exists (safe to re-run):
#   1. pip-download the llama-cpp-python sdist (it vendors llama.cpp's source)
#   2. unpack it under PEER_DIR
#   3. configure + build llama-bench, llama-server (and llama-cli) with cmake:
#      Release, CPU only, -march=native, static libs, no CURL/OpenSSL, no web UI
#      download; copy the binaries to PEER_DIR/bin
#   4. write the random-weight Qwen2.5-0.5B-shaped HF checkpoint (f16)
#   5. write the matching GGUF (same f16 weights + real Qwen2 vocab metadata)
#
# Environment knobs:
#   LLAMA_CPP_PY_VERSION  sdist version to fetch   (default 0.3.36)
#   JOBS                  parallel compile jobs     (default 2)
#   BUILD_CLI             also build llama-cli: 1/0 (default 1)
#   PYTHON                python interpreter        (default python3)
#   BIN_DIR               where binaries are copied (default PEER_DIR/bin)
#
# Needs: pip, cmake (>= 3.14), a C/C++ compiler, python with numpy,
# safetensors, pyyaml, tqdm, requests.  Everything is written outside the
# repository, under PEER_DIR; nothing listens on or talks to the network
# except pip.
set -euo pipefail

PEER_DIR=${1:-/work/peer}
VERSION=${LLAMA_CPP_PY_VERSION:-0.3.36}
JOBS=${JOBS:-2}
BUILD_CLI=${BUILD_CLI:-1}
PYTHON=${PYTHON:-python3}

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SDIST_DIR=$PEER_DIR/sdist
SDIST=$SDIST_DIR/llama_cpp_python-$VERSION.tar.gz
SRC_ROOT=$PEER_DIR/llama_cpp_python-$VERSION
LLAMA_SRC=$SRC_ROOT/vendor/llama.cpp
BUILD_DIR=$PEER_DIR/llama-build
BIN_DIR=${BIN_DIR:-$PEER_DIR/bin}
HF_DIR=$PEER_DIR/qwen2.5-0.5b-dummy-f16
GGUF=$PEER_DIR/qwen2.5-0.5b-dummy-f16.gguf

log() { printf '[peer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$PEER_DIR" "$SDIST_DIR" "$BIN_DIR"

# 1. sdist -------------------------------------------------------------------
if [[ -f $SDIST ]]; then
    log "sdist present: $SDIST"
else
    log "downloading llama-cpp-python==$VERSION sdist"
    # --no-binary makes pip prepare metadata, which builds ninja/cmake wheels in
    # an isolated env first; that costs a minute or two but works offline
    # from PyPI alone.
    pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$SDIST_DIR"
fi

# 2. unpack ------------------------------------------------------------------
if [[ -f $LLAMA_SRC/CMakeLists.txt ]]; then
    log "source present: $LLAMA_SRC"
else
    log "unpacking into $PEER_DIR"
    tar -xzf "$SDIST" -C "$PEER_DIR"
fi

# 3. build -------------------------------------------------------------------
command -v cmake >/dev/null || { log "cmake missing (apt-get update && apt-get install -y cmake)"; exit 1; }

TARGETS=(llama-bench llama-batched-bench llama-server)
[[ $BUILD_CLI == 1 ]] && TARGETS+=(llama-cli)

need_build=0
for t in "${TARGETS[@]}"; do [[ -x $BIN_DIR/$t ]] || need_build=1; done

if [[ $need_build == 0 ]]; then
    log "binaries present in $BIN_DIR"
else
    if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
        log "configuring $BUILD_DIR"
        cmake -S "$LLAMA_SRC" -B "$BUILD_DIR" \
            -DCMAKE_BUILD_TYPE=Release \
            -DGGML_NATIVE=ON \
            -DLLAMA_CURL=OFF \
            -DLLAMA_OPENSSL=OFF \
            -DLLAMA_BUILD_UI=OFF \
            -DLLAMA_USE_PREBUILT_UI=OFF \
            -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF \
            -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF
    fi
    log "building ${TARGETS[*]} with -j$JOBS"
    start=$(date +%s)
    cmake --build "$BUILD_DIR" --config Release -j"$JOBS" --target "${TARGETS[@]}"
    log "build took $(( $(date +%s) - start )) s"
    for t in "${TARGETS[@]}"; do cp -f "$BUILD_DIR/bin/$t" "$BIN_DIR/$t"; done
fi

# 4 + 5. model ---------------------------------------------------------------
if [[ -f $HF_DIR/model.safetensors && -f $HF_DIR/tokenizer.json && -f $GGUF ]]; then
    log "models present: $HF_DIR, $GGUF"
else
    log "writing dummy model + GGUF"
    "$PYTHON" "$REPO_ROOT/scripts/make_bench_model.py" "$HF_DIR" --dtype f16 --reuse \
        --gguf "$GGUF" \
        --vocab-gguf "$LLAMA_SRC/models/ggml-vocab-qwen2.gguf" \
        --gguf-py "$LLAMA_SRC/gguf-py"
fi

log "done"
log "  binaries: $BIN_DIR/{$(IFS=,; echo "${TARGETS[*]}")}"
log "  HF dir:   $HF_DIR"
log "  GGUF:     $GGUF"
