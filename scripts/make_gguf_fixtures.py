#!/usr/bin/env python3
"""Generate the GGUF test fixtures under testdata/gguf/.

Run by hand, not in CI (needs the tiny models of make_fixtures.py):

    pip install gguf torch transformers numpy safetensors
    python scripts/make_gguf_fixtures.py

`--blocks-only` writes only quant-blocks.gguf (needs just gguf and numpy).

What it writes:
  1. quant-blocks.gguf: for every tensor type Pagoda reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
     Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
     IQ3_S, IQ1_S, IQ1_M) a 4 x 512 tensor of random blocks (finite scales, random quants), and next to
     it `<name>.dequantized`, the same values as f32 from the `gguf` package's reference
     dequantizers. Rust must reproduce them bit for bit.
  2. Models converted from the tiny safetensors checkpoints, with the tokenizer and chat
     template in the metadata as llama.cpp's converter lays them out:
       tiny-qwen2-f16.gguf      qwen2, F16 matrices
       tiny-mistral-q8_0.gguf   llama (Mistral), Q8_0, q/k rows permuted as GGUF stores them
       tiny-qwen3-q4_0.gguf     qwen3, Q4_0 with BF16 embeddings
       tiny-qwen2-kquants.gguf  a new 256-wide Qwen2 (K-quants need rows of 256): a Q4_K_M
                                style mix of Q4_K, Q5_K and Q6_K
     and `<file>.reference.json`: for the prompts of the source model's reference.json, the
     last-position logits and greedy tokens (with each step's top-2 margin) that transformers
     computes on the dequantized weights, in float32.

The K-quant encoders here are simple round-to-nearest ones written for these fixtures (the
`gguf` package only decodes K-quants); any valid encoding serves, because the references are
computed from what the file decodes to.
"""

import json
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

REPO_ROOT = Path(__file__).resolve().parent.parent
MODELS = REPO_ROOT / "testdata" / "models"
OUT = REPO_ROOT / "testdata" / "gguf"
NUM_GREEDY = 16
QK = 256


# --------------------------------------------------------------------------
# K-quant encoders (round to nearest; layouts as the gguf package decodes them)
# --------------------------------------------------------------------------

def f16_bytes(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).reshape(-1, 1).view(np.uint8)


def pack_scales_q4k(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Eight 6-bit scales and mins per block into the 12-byte K-quant layout."""
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    for j in range(4):
        out[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        out[:, j + 4] = (m[:, j] & 63) | ((m[:, j + 4] >> 4) << 6)
        out[:, j + 8] = (sc[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
    return out


def quantize_q45k(x: np.ndarray, bits: int) -> np.ndarray:
    """Q4_K (bits=4) or Q5_K (bits=5): w = d*sc*q - dmin*m over sub-blocks of 32."""
    levels = (1 << bits) - 1
    blocks = x.reshape(-1, 8, 32).astype(np.float32)
    lo = np.minimum(blocks.min(-1), 0.0)
    hi = blocks.max(-1)
    step = (hi - lo) / levels
    offset = -lo
    d = (step.max(-1) / 63).astype(np.float16).astype(np.float32)
    dmin = (offset.max(-1) / 63).astype(np.float16).astype(np.float32)
    sc = np.where(d[:, None] > 0, np.round(step / np.maximum(d[:, None], 1e-30)), 0).clip(0, 63).astype(np.uint8)
    m = np.where(dmin[:, None] > 0, np.round(offset / np.maximum(dmin[:, None], 1e-30)), 0).clip(0, 63).astype(np.uint8)
    scale = (d[:, None] * sc)[..., None]
    shift = (dmin[:, None] * m)[..., None]
    q = np.where(scale > 0, np.round((blocks + shift) / np.maximum(scale, 1e-30)), 0).clip(0, levels).astype(np.uint8)
    low = (q & 15).reshape(-1, 4, 2, 32)
    qs = (low[:, :, 0, :] | (low[:, :, 1, :] << 4)).reshape(-1, 128)
    parts = [f16_bytes(d), f16_bytes(dmin), pack_scales_q4k(sc, m)]
    if bits == 5:
        high = (q >> 4) & 1  # (n, 8, 32)
        qh = np.zeros((q.shape[0], 32), dtype=np.uint8)
        for j in range(8):
            qh |= high[:, j, :] << j
        parts.append(qh)
    parts.append(qs)
    return np.concatenate(parts, axis=1)


def quantize_q6k(x: np.ndarray) -> np.ndarray:
    """Q6_K: w = d*sc*(q-32) over sub-blocks of 16, int8 scales."""
    blocks = x.reshape(-1, 16, 16).astype(np.float32)
    step = np.abs(blocks).max(-1) / 31
    d = (step.max(-1) / 127).astype(np.float16).astype(np.float32)
    sc = np.where(d[:, None] > 0, np.round(step / np.maximum(d[:, None], 1e-30)), 0).clip(-128, 127).astype(np.int8)
    scale = (d[:, None] * sc.astype(np.float32))[..., None]
    q = np.where(scale != 0, np.round(blocks / np.where(scale != 0, scale, 1)), 0).clip(-32, 31)
    q = (q + 32).astype(np.uint8).reshape(-1, 8, 32)  # 8 groups of 32
    ql = np.zeros((q.shape[0], 128), dtype=np.uint8)
    qh = np.zeros((q.shape[0], 64), dtype=np.uint8)
    for g in range(8):
        h, r = divmod(g, 4)
        shift, b = divmod(r, 2)
        ql[:, h * 64 + b * 32: h * 64 + b * 32 + 32] |= (q[:, g] & 15) << (4 * shift)
        qh[:, h * 32: h * 32 + 32] |= (q[:, g] >> 4) << (2 * r)
    return np.concatenate([ql, qh, sc.view(np.uint8), f16_bytes(d)], axis=1)


def encode(x: np.ndarray, qtype: T) -> np.ndarray:
    """Rows of `x` (float32, 2-D) as the bytes of `qtype`, shaped (rows, row bytes)."""
    rows = x.shape[0]
    if qtype == T.Q4_K:
        data = quantize_q45k(x, 4)
    elif qtype == T.Q5_K:
        data = quantize_q45k(x, 5)
    elif qtype == T.Q6_K:
        data = quantize_q6k(x)
    else:
        return quantize(x.astype(np.float32), qtype)
    data = data.reshape(rows, -1)
    # The decoder must give back (close to) what went in.
    back = dequantize(data, qtype).reshape(x.shape)
    rel = np.abs(back - x).max() / max(np.abs(x).max(), 1e-12)
    assert rel < 0.2, f"{qtype.name} round trip error {rel}"
    return data


# --------------------------------------------------------------------------
# 1. Random blocks for the bit-exact dequantization test
# --------------------------------------------------------------------------

def random_blocks(rng, qtype: T, rows: int, cols: int) -> np.ndarray:
    if qtype == T.F32:
        return rng.standard_normal((rows, cols)).astype(np.float32)
    if qtype == T.F16:
        return rng.standard_normal((rows, cols)).astype(np.float16)
    if qtype == T.BF16:
        bits = rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint32) >> 16
        return bits.astype(np.uint16).view(np.uint8)
    block_values, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * cols // block_values
    data = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    # Scale fields (f16) finite and of a plausible size; quants stay random.
    scale = lambda: f16_bytes(rng.uniform(-0.05, 0.05, n).astype(np.float32))
    if qtype in (T.Q8_0, T.Q4_0, T.Q5_0, T.IQ4_NL, T.IQ4_XS):
        data[:, 0:2] = scale()
    elif qtype in (T.Q4_K, T.Q5_K, T.Q4_1, T.Q5_1):
        data[:, 0:2] = scale()
        data[:, 2:4] = scale()
    elif qtype == T.Q6_K:
        data[:, 208:210] = scale()
    elif qtype == T.Q2_K:
        data[:, 80:82] = scale()
        data[:, 82:84] = scale()
    elif qtype == T.Q3_K:
        data[:, 108:110] = scale()
    elif qtype in (T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS, T.IQ3_S, T.IQ1_S):
        data[:, 0:2] = scale()
    elif qtype == T.IQ1_M:
        # `d`'s f16 bits are the top nibbles of the four scale words (bytes 48-55).
        bits = scale().view(np.uint16).reshape(n)
        for i in range(4):
            word = data[:, 48 + 2 * i:50 + 2 * i].copy().view(np.uint16).reshape(n)
            word = (word & 0x0FFF) | (((bits >> (4 * i)) & 0xF) << 12)
            data[:, 48 + 2 * i:50 + 2 * i] = word.astype(np.uint16).view(np.uint8).reshape(n, 2)
    return data.reshape(rows, -1)


def write_quant_blocks() -> None:
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(str(OUT / "quant-blocks.gguf"), "pagoda-test")
    rows, cols = 4, 512
    # Types added later go last, so the earlier ones keep their random blocks.
    for qtype in [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K,
                  T.Q2_K, T.Q3_K, T.IQ4_NL, T.IQ4_XS, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS,
                  T.IQ3_S, T.IQ1_S, T.IQ1_M]:
        data = random_blocks(rng, qtype, rows, cols)
        raw = None if qtype in (T.F32, T.F16) else qtype
        w.add_tensor(qtype.name, data, raw_dtype=raw)
        values = dequantize(data, qtype).astype(np.float32).reshape(rows, cols)
        assert np.isfinite(values).all()
        w.add_tensor(qtype.name + ".dequantized", values)
    finish(w)


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# --------------------------------------------------------------------------
# 2. Models
# --------------------------------------------------------------------------

def add_tokenizer(w: gguf.GGUFWriter, model_dir: Path) -> None:
    """The byte-level BPE of the tiny models, as llama.cpp's converter writes a gpt2 vocab."""
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    vocab = tok["model"]["vocab"]
    added = {t["id"]: t for t in tok["added_tokens"]}
    size = max(max(vocab.values()), max(added, default=-1)) + 1
    tokens = [""] * size
    types = [gguf.TokenType.NORMAL] * size
    for piece, i in vocab.items():
        tokens[i] = piece
    for i, t in added.items():
        tokens[i] = t["content"]
        types[i] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {t: i for i, t in enumerate(tokens)}
    for key, add in [("eos_token", w.add_eos_token_id), ("pad_token", w.add_pad_token_id),
                     ("bos_token", w.add_bos_token_id)]:
        if cfg.get(key) in ids:
            add(ids[cfg[key]])
    w.add_add_bos_token(bool(cfg.get("add_bos_token", False)))
    w.add_chat_template(cfg["chat_template"])


def permute_qk(w: np.ndarray, heads: int) -> np.ndarray:
    """Hugging Face's rotate-half row order to GGUF's interleaved pairs (llama only)."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, heads: int) -> np.ndarray:
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    assert parts[:2] == ["model", "layers"], hf
    inner = ".".join(parts[3:-1])
    return f"blk.{parts[2]}.{GGUF_NAMES[inner]}.{parts[-1]}"


def add_hparams(w: gguf.GGUFWriter, cfg, arch: str) -> None:
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"] if hasattr(cfg, "rope_parameters") and cfg.rope_parameters else cfg.rope_theta))
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(1)


def convert(model, arch: str, out: Path, model_dir: Path, pick) -> dict:
    """Writes `model` as GGUF with types from `pick(hf_name, shape)`; returns the state dict
    the file decodes to, in Hugging Face row order."""
    cfg = model.config
    w = gguf.GGUFWriter(str(out), arch)
    w.add_name(out.stem)
    add_hparams(w, cfg, arch)
    add_tokenizer(w, model_dir)
    decoded = {}
    for name, p in sorted(model.state_dict().items()):
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        x = p.detach().to(torch.float32).numpy()
        heads = {"q_proj": cfg.num_attention_heads, "k_proj": cfg.num_key_value_heads}.get(name.split(".")[-2])
        permuted = arch == "llama" and heads is not None
        if permuted:
            x = permute_qk(x, heads)
        qtype = pick(name, x.shape) if x.ndim == 2 else T.F32
        if qtype == T.F32:
            data, raw = x.astype(np.float32), None
        elif qtype == T.F16:
            data, raw = x.astype(np.float16), None
        else:
            data, raw = encode(x, qtype), qtype
        w.add_tensor(gguf_name(name), data, raw_dtype=raw)
        back = dequantize(data, qtype).astype(np.float32).reshape(x.shape)
        if permuted:
            back = unpermute_qk(back, heads)
        decoded[name] = torch.from_numpy(back.copy())
    finish(w)
    if cfg.tie_word_embeddings:
        decoded["lm_head.weight"] = decoded["model.embed_tokens.weight"]
    return decoded


def run_case(model, input_ids: list) -> dict:
    with torch.no_grad():
        return run_case_without_grad(model, input_ids)


def run_case_without_grad(model, input_ids: list) -> dict:
    ids = list(input_ids)
    logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    last = [float(str(v)) for v in logits.numpy().astype(np.float32)]
    greedy, margins = [], []
    for _ in range(NUM_GREEDY):
        top2 = torch.topk(logits, 2)
        margins.append(float(top2.values[0] - top2.values[1]))
        greedy.append(int(top2.indices[0]))
        ids.append(greedy[-1])
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    return dict(last_logits=last, greedy_ids=greedy, margins=margins)


def write_model(source: str, arch: str, file: str, pick, model=None) -> None:
    model_dir = MODELS / source
    if model is None:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    out = OUT / file
    decoded = convert(model, arch, out, model_dir, pick)
    model.load_state_dict(decoded, strict=False)
    if model.config.tie_word_embeddings:
        model.tie_weights()
    cases = json.loads((model_dir / "reference.json").read_text())["cases"]
    reference = {
        "file": file,
        "source": source,
        "transformers_version": transformers.__version__,
        "cases": [dict(input_ids=c["input_ids"], **run_case(model, c["input_ids"])) for c in cases],
    }
    (OUT / (file + ".reference.json")).write_text(json.dumps(reference, separators=(",", ":")) + "\n")
    print(f"{file}: {out.stat().st_size} bytes, worst margin "
          f"{min(min(c['margins']) for c in reference['cases']):.4f}")


def kquant_model():
    """A Qwen2 as wide as one K-quant block (256), random weights like make_fixtures.py's."""
    base = json.loads((MODELS / "tiny-qwen2" / "config.json").read_text())
    cfg = transformers.Qwen2Config(
        vocab_size=base["vocab_size"], hidden_size=256, intermediate_size=512,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=True, eos_token_id=base["eos_token_id"], pad_token_id=0)
    model = transformers.Qwen2ForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    gen = torch.Generator().manual_seed(6000)
    with torch.no_grad():
        for name, p in sorted(dict(model.named_parameters()).items()):
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif "embed_tokens" in name:
                p.copy_(0.15 * noise)
            else:
                p.copy_(0.08 * noise)
    return model


def q4_k_m(name: str, shape) -> T:
    """The tensor types llama.cpp's Q4_K_M recipe picks, near enough: 6-bit for the embeddings
    and attn_v, 5-bit for ffn_down, 4-bit elsewhere."""
    if "embed_tokens" in name or "v_proj" in name:
        return T.Q6_K
    if "down_proj" in name or "o_proj" in name:
        return T.Q5_K
    return T.Q4_K


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_quant_blocks()
    if "--blocks-only" in sys.argv:
        return
    global torch, transformers
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    write_model("tiny-qwen2", "qwen2", "tiny-qwen2-f16.gguf", lambda n, s: T.F16)
    write_model("tiny-mistral", "llama", "tiny-mistral-q8_0.gguf", lambda n, s: T.Q8_0)
    write_model("tiny-qwen3", "qwen3", "tiny-qwen3-q4_0.gguf",
                lambda n, s: T.BF16 if "embed_tokens" in n else T.Q4_0)
    write_model("tiny-qwen2", "qwen2", "tiny-qwen2-kquants.gguf", q4_k_m, model=kquant_model())


if __name__ == "__main__":
    main()
