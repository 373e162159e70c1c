#!/usr/bin/env python3
"""Write a benchmark checkpoint: Qwen2.5-0.5B-Instruct shape (or 1.5B), random weights.

The output is a Hugging Face-style directory (config.json,
generation_config.json, model.safetensors) whose tensors have the real
Qwen2 names and shapes but values drawn from a seeded normal distribution.
It is only meant for speed measurements; the text it produces is noise.

Usage:
    make_bench_model.py OUT_DIR [--shape 0.5b|1.5b] [--dtype f16|f32] [--seed N] [--std S] [--reuse]
        [--gguf OUT.gguf --vocab-gguf ggml-vocab-qwen2.gguf [--gguf-py DIR]]

With --gguf, the checkpoint in OUT_DIR is also written as a GGUF file for
llama.cpp (architecture "qwen2"): 2-D weights keep the checkpoint's dtype
bit for bit, 1-D tensors (norms, biases) are stored as f32 (exact widening,
as llama.cpp's own converter does).  The tokenizer metadata (real Qwen2 BPE
vocab, 151936 entries, merges, chat template) is copied from a vocab-only
GGUF such as llama.cpp's models/ggml-vocab-qwen2.gguf; the EOS id is set to
151645 (<|im_end|>) to match the Instruct config.  --gguf-py points at
llama.cpp's gguf-py directory if the `gguf` package is not installed.
After writing, every tensor is read back and compared with the checkpoint.

--reuse keeps an existing OUT_DIR/model.safetensors (and an existing --gguf
file) instead of regenerating them.

With --vocab-gguf, OUT_DIR also gets a Hugging Face tokenizer.json (and
tokenizer_config.json) built from that vocab: byte-level BPE with the Qwen2
pre-tokenizer split, the 151643 regular tokens and merges, and the control
tokens (<|endoftext|>, <|im_start|>, <|im_end|>) as added special tokens.
The vocab's [PADnnnnnn] filler entries are left out, as in the real
tokenizer (config.vocab_size stays 151936 for the embedding rows).

--shape 1.5b writes the Qwen2.5-1.5B shape instead: its 1536- and 8960-wide rows are whole
K-quant super-blocks (256 values), so a Q4_K_M file quantized from it holds Q4_K and Q6_K
as the files of larger models do (the 0.5B shape's 896-wide rows fall back to Q5_0/Q8_0).

Needs numpy and safetensors (pip install numpy safetensors); no torch.
The GGUF step also needs gguf-py (numpy, pyyaml, tqdm, requests).
"""

import argparse
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file

# (hidden, layers, heads, kv heads, intermediate) of the published configs.
SHAPES = {"0.5b": (896, 24, 14, 2, 4864), "1.5b": (1536, 28, 12, 2, 8960)}
HIDDEN, LAYERS, HEADS, KV_HEADS, INTERMEDIATE = SHAPES["0.5b"]
VOCAB = 151936
HEAD_DIM = HIDDEN // HEADS  # 64


def use_shape(name):
    global HIDDEN, LAYERS, HEADS, KV_HEADS, INTERMEDIATE, HEAD_DIM
    HIDDEN, LAYERS, HEADS, KV_HEADS, INTERMEDIATE = SHAPES[name]
    HEAD_DIM = HIDDEN // HEADS


def build_config(torch_dtype):
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "intermediate_size": INTERMEDIATE,
        "vocab_size": VOCAB,
        "max_position_embeddings": 32768,
        "max_window_layers": 21,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "torch_dtype": torch_dtype,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "use_cache": True,
        "use_sliding_window": False,
        "sliding_window": 32768,
        "rope_scaling": None,
        "transformers_version": "4.43.1",
    }


def build_generation_config():
    return {
        "bos_token_id": 151643,
        "pad_token_id": 151643,
        "eos_token_id": [151645, 151643],
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.8,
        "top_k": 20,
        "repetition_penalty": 1.05,
        "transformers_version": "4.43.1",
    }


def tensor_shapes():
    """Yield (name, shape, kind) in a stable order; kind is 'w' or 'norm'."""
    q_out = HEADS * HEAD_DIM
    kv_out = KV_HEADS * HEAD_DIM
    yield "model.embed_tokens.weight", (VOCAB, HIDDEN), "w"
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (HIDDEN,), "norm"
        yield p + "self_attn.q_proj.weight", (q_out, HIDDEN), "w"
        yield p + "self_attn.q_proj.bias", (q_out,), "w"
        yield p + "self_attn.k_proj.weight", (kv_out, HIDDEN), "w"
        yield p + "self_attn.k_proj.bias", (kv_out,), "w"
        yield p + "self_attn.v_proj.weight", (kv_out, HIDDEN), "w"
        yield p + "self_attn.v_proj.bias", (kv_out,), "w"
        yield p + "self_attn.o_proj.weight", (HIDDEN, q_out), "w"
        yield p + "post_attention_layernorm.weight", (HIDDEN,), "norm"
        yield p + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN), "w"
        yield p + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN), "w"
        yield p + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE), "w"
    yield "model.norm.weight", (HIDDEN,), "norm"


def to_dtype(arr32, dtype):
    if dtype == "f16":
        return arr32.astype(np.float16)
    if dtype == "f32":
        return arr32
    if dtype == "bf16":
        # numpy has no bfloat16; safetensors.numpy cannot tag it either.
        raise SystemExit("bf16 is not supported without torch; use f16 or f32")
    raise SystemExit(f"unknown dtype {dtype}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--shape", default="0.5b", choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="f16", choices=["f16", "f32"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--reuse", action="store_true",
                    help="keep an existing OUT_DIR/model.safetensors and GGUF")
    ap.add_argument("--gguf", help="also write this GGUF file")
    ap.add_argument("--vocab-gguf", help="vocab-only GGUF to take tokenizer metadata from")
    ap.add_argument("--gguf-py", help="directory holding the gguf package (llama.cpp/gguf-py)")
    args = ap.parse_args(argv)
    use_shape(args.shape)

    st_path = os.path.join(args.out_dir, "model.safetensors")
    if args.reuse and os.path.exists(st_path) \
            and os.path.exists(os.path.join(args.out_dir, "config.json")):
        print(f"reusing {st_path}", file=sys.stderr)
    else:
        write_checkpoint(args)

    if args.vocab_gguf:
        write_tokenizer(args.out_dir, args.vocab_gguf, args.gguf_py)

    if args.gguf:
        if not args.vocab_gguf:
            raise SystemExit("--gguf needs --vocab-gguf")
        if args.reuse and os.path.exists(args.gguf):
            print(f"reusing {args.gguf}", file=sys.stderr)
            return
        write_gguf(args.out_dir, args.gguf, args.vocab_gguf, args.gguf_py)


def write_checkpoint(args):
    os.makedirs(args.out_dir, exist_ok=True)
    torch_dtype = {"f16": "float16", "f32": "float32"}[args.dtype]

    rng = np.random.default_rng(args.seed)
    tensors = {}
    total = 0
    for name, shape, kind in tensor_shapes():
        if kind == "norm":
            a = np.ones(shape, dtype=np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32)
            a *= np.float32(args.std)
        tensors[name] = to_dtype(a, args.dtype)
        total += int(np.prod(shape))

    st_path = os.path.join(args.out_dir, "model.safetensors")
    save_file(tensors, st_path, metadata={"format": "pt"})
    os.chmod(st_path, 0o644)

    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(build_config(torch_dtype), f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out_dir, "generation_config.json"), "w") as f:
        json.dump(build_generation_config(), f, indent=2)
        f.write("\n")

    print(f"wrote {len(tensors)} tensors, {total} parameters ({args.dtype}) "
          f"seed={args.seed} std={args.std} -> {args.out_dir}", file=sys.stderr)


# Qwen2's pre-tokenizer split (same as in its published tokenizer.json).
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_CONTROL = 3


def import_gguf(gguf_py):
    if gguf_py and gguf_py not in sys.path:
        sys.path.insert(0, gguf_py)
    import gguf
    return gguf


def write_tokenizer(out_dir, vocab_path, gguf_py):
    gguf = import_gguf(gguf_py)
    r = gguf.GGUFReader(vocab_path)
    if r.fields["tokenizer.ggml.model"].contents() != "gpt2":
        raise SystemExit("vocab GGUF is not a byte-level BPE (gpt2) vocab")
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()

    vocab = {}
    added = []
    for i, (tok, typ) in enumerate(zip(tokens, types)):
        if typ == TOKEN_TYPE_NORMAL:
            vocab[tok] = i
        elif typ == TOKEN_TYPE_CONTROL:
            added.append({"id": i, "content": tok, "single_word": False,
                          "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True})
        # other types ([PAD] fillers) are not part of the HF tokenizer

    byte_level = {"type": "ByteLevel", "add_prefix_space": False,
                  "trim_offsets": False, "use_regex": False}
    tok_json = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT_REGEX},
             "behavior": "Isolated", "invert": False},
            dict(byte_level),
        ]},
        "post_processor": dict(byte_level),
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": list(merges)},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok_json, f, ensure_ascii=False)

    chat_template = None
    if "tokenizer.chat_template" in r.fields:
        chat_template = r.fields["tokenizer.chat_template"].contents()
    tok_cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "model_max_length": 131072,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "clean_up_tokenization_spaces": False,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                 for a in added},
    }
    if chat_template:
        tok_cfg["chat_template"] = chat_template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tok_cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"wrote tokenizer.json ({len(vocab)} tokens, {len(merges)} merges, "
          f"{len(added)} special) -> {out_dir}", file=sys.stderr)


# HF name suffix -> GGUF name suffix for one decoder layer (llama.cpp "qwen2").
LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf_name):
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    parts = hf_name.split(".", 3)  # model, layers, N, rest
    if len(parts) == 4 and parts[0] == "model" and parts[1] == "layers":
        rest = LAYER_MAP.get(parts[3])
        if rest is not None:
            return f"blk.{int(parts[2])}.{rest}"
    raise SystemExit(f"no GGUF name for tensor {hf_name}")


def write_gguf(hf_dir, out_path, vocab_path, gguf_py):
    gguf = import_gguf(gguf_py)
    from safetensors import safe_open

    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "qwen2":
        raise SystemExit("only qwen2 checkpoints are supported")

    vocab = gguf.GGUFReader(vocab_path)

    def field(key):
        fld = vocab.fields.get(key)
        return None if fld is None else fld.contents()

    tokens = field("tokenizer.ggml.tokens")
    if tokens is None or len(tokens) != cfg["vocab_size"]:
        raise SystemExit(f"vocab GGUF has {0 if tokens is None else len(tokens)} tokens, "
                         f"config wants {cfg['vocab_size']}")

    tmp_path = out_path + ".tmp"
    w = gguf.GGUFWriter(tmp_path, "qwen2")
    w.add_name("Qwen2.5-0.5B-Instruct-shaped (random weights, benchmark only)")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(float(cfg["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))

    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    w.add_tokenizer_pre(field("tokenizer.ggml.pre"))
    w.add_token_list(tokens)
    w.add_token_types(field("tokenizer.ggml.token_type"))
    w.add_token_merges(field("tokenizer.ggml.merges"))
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(cfg["bos_token_id"])
    w.add_add_bos_token(False)
    tmpl = field("tokenizer.chat_template")
    if tmpl:
        w.add_chat_template(tmpl)

    wanted_dtype = None
    names = []
    with safe_open(os.path.join(hf_dir, "model.safetensors"), framework="numpy") as st:
        for name in st.keys():
            names.append(name)
        order = [n for n, _, _ in tensor_shapes() if n in names]
        order += sorted(n for n in names if n not in order)
        for name in order:
            a = st.get_tensor(name)
            if a.ndim == 1:
                a = a.astype(np.float32)
            else:
                wanted_dtype = wanted_dtype or a.dtype
                if a.dtype != wanted_dtype:
                    raise SystemExit("mixed 2-D dtypes in checkpoint")
            w.add_tensor(gguf_name(name), np.ascontiguousarray(a))

    ftype = {np.dtype(np.float16): gguf.LlamaFileType.MOSTLY_F16,
             np.dtype(np.float32): gguf.LlamaFileType.ALL_F32}[np.dtype(wanted_dtype)]
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp_path, out_path)

    verify_gguf(hf_dir, out_path, gguf)
    print(f"wrote {out_path}", file=sys.stderr)


def verify_gguf(hf_dir, gguf_path, gguf):
    from safetensors import safe_open
    r = gguf.GGUFReader(gguf_path)
    by_name = {t.name: t for t in r.tensors}
    n = 0
    with safe_open(os.path.join(hf_dir, "model.safetensors"), framework="numpy") as st:
        for name in st.keys():
            ref = st.get_tensor(name)
            t = by_name.pop(gguf_name(name))
            got = np.asarray(t.data).reshape(ref.shape)
            if ref.ndim == 1:
                ok = np.array_equal(got, ref.astype(np.float32))
            else:
                ok = got.dtype == ref.dtype and np.array_equal(
                    got.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8))
            if not ok:
                raise SystemExit(f"GGUF tensor for {name} differs from the checkpoint")
            n += 1
    if by_name:
        raise SystemExit(f"GGUF has extra tensors: {sorted(by_name)[:5]}")
    print(f"verified {n} tensors: GGUF matches the checkpoint bit for bit", file=sys.stderr)


if __name__ == "__main__":
    main()
