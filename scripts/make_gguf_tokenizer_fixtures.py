#!/usr/bin/env python3
"""Tokenizer-only GGUF files, each next to the Hugging Face tokenizer.json it was made from.

Writes testdata/gguf-tokenizers/<name>/{tokenizer.gguf, tokenizer.json[, tokenizer_config.json]},
which crates/pagoda-text/tests/gguf_tokenizer.rs reads: Pagoda's tokenizer built from the GGUF
metadata must encode and decode like the `tokenizers` crate loading the tokenizer.json, and
the GGUF chat template must render like the directory's tokenizer_config.json. Run by hand:

    pip install gguf tokenizers transformers sentencepiece
    python3 scripts/make_gguf_tokenizer_fixtures.py

Fixtures:
  tiny-qwen2  the byte-level BPE of testdata/models/tiny-qwen2 (GPT-2 regex: pre "gpt-2"),
              ChatML template
  smollm      the same vocabulary behind SmolLM's pre-tokenizer (single digits, GPT-2 regex)
  llama3      byte-level BPE trained here with Llama 3's regex (pre "llama-bpe"), Llama 3
              special tokens, BOS added, Llama 3.1's template
  qwen2       byte-level BPE trained here with Qwen2's regex and NFC (pre "qwen2"), ChatML
              tokens plus <think> (not special), Qwen2.5's template
  spm         a SentencePiece BPE model trained here (byte fallback, <0xXX> pieces, scores),
              model "llama"; its tokenizer.json is built the way transformers converts
              Llama's SentencePiece model (merges from the piece scores)

The GGUF metadata uses the keys llama.cpp's convert_hf_to_gguf.py writes; the conversion code
here is this project's own. The files hold no tensors.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import gguf
import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers
from transformers.tokenization_utils_base import generate_merges

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "testdata" / "gguf-tokenizers"
TINY_QWEN2 = ROOT / "testdata" / "models" / "tiny-qwen2"
TEMPLATES = ROOT / "testdata" / "chat_templates" / "templates"

# The pre-tokenizer regexes of the tokenizer.json files of Llama 3 and Qwen2.5.
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

MULTILINGUAL = """\
北京是中华人民共和国的首都，也是全国的政治、文化中心。我们今天去图书馆看书，然后一起吃晚饭。
東京は日本の首都です。私は毎朝コーヒーを飲みながら、ニュースを読みます。ひらがなとカタカナと漢字。
서울은 대한민국의 수도입니다. 오늘 날씨가 정말 좋네요.
Москва — столица России. Привет, как дела? Всё хорошо, спасибо.
Ελληνικά: Καλημέρα κόσμε. العربية: مرحبا بالعالم. हिन्दी: नमस्ते दुनिया।
Café, naïve, résumé, façade, Straße, Ærø, Ångström, São Paulo, jalapeño.
Emoji: 😀 🎉 👍🏽 👨‍👩‍👧 🇯🇵 ❤️ ✨ 🚀 — and math: ∑ ∫ √2 ≈ 1.41421, π ≈ 3.14159.
Numbers: 0 1 12 123 1234 12345 3.14 -42 1,000,000 2026-01-15 10:30:05 0x1F 1e-9.
"""


def training_corpus() -> str:
    """Python standard library source plus some text in other scripts."""
    stdlib = Path(json.__file__).resolve().parent.parent
    names = ["textwrap.py", "string.py", "argparse.py", "difflib.py", "json/decoder.py",
             "json/encoder.py", "json/__init__.py", "shlex.py", "fractions.py"]
    parts = [(stdlib / name).read_text(encoding="utf-8") for name in names]
    parts += [MULTILINGUAL] * 20
    return "\n".join(parts)


def write_gguf(path: Path, arch: str, tokenizer_model: str, pre: str | None, tokens, types,
               scores=None, merges=None, special: dict | None = None, add_bos=None,
               add_eos=None, add_space_prefix=None, chat_template=None):
    writer = gguf.GGUFWriter(path, arch=arch)
    writer.add_name(path.parent.name)
    writer.add_tokenizer_model(tokenizer_model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if scores is not None:
        writer.add_token_scores(scores)
    if merges is not None:
        writer.add_token_merges(merges)
    adders = {"bos": writer.add_bos_token_id, "eos": writer.add_eos_token_id,
              "eot": writer.add_eot_token_id, "eom": writer.add_eom_token_id,
              "unk": writer.add_unk_token_id, "pad": writer.add_pad_token_id}
    for kind, token_id in (special or {}).items():
        adders[kind](token_id)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    if add_eos is not None:
        writer.add_add_eos_token(add_eos)
    if add_space_prefix is not None:
        writer.add_add_space_prefix(add_space_prefix)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def byte_level_vocab(tok_json: dict):
    """tokens, token types and merges of a byte-level BPE tokenizer.json, by id."""
    model = tok_json["model"]
    by_id = {i: (token, NORMAL) for token, i in model["vocab"].items()}
    for added in tok_json["added_tokens"]:
        by_id[added["id"]] = (added["content"], CONTROL if added["special"] else USER_DEFINED)
    count = max(by_id) + 1
    missing = [i for i in range(count) if i not in by_id]
    if missing:
        sys.exit(f"vocabulary has holes at ids {missing[:10]}")
    tokens = [by_id[i][0] for i in range(count)]
    types = [by_id[i][1] for i in range(count)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


def write_fixture(name: str, tok: Tokenizer | dict, config: dict | None):
    directory = OUT / name
    directory.mkdir(parents=True, exist_ok=True)
    text = tok.to_str(pretty=False) if isinstance(tok, Tokenizer) else json.dumps(
        tok, ensure_ascii=False)
    # Reformat to one token per line at most: readable diffs, small files.
    (directory / "tokenizer.json").write_text(
        json.dumps(json.loads(text), ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    if config is not None:
        (directory / "tokenizer_config.json").write_text(
            json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return directory


def token_ids(tokens, config: dict, keys: dict) -> dict:
    index = {t: i for i, t in enumerate(tokens)}
    return {kind: index[config[key]] for kind, key in keys.items() if config.get(key)}


def tiny_qwen2():
    tok_json = json.loads((TINY_QWEN2 / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((TINY_QWEN2 / "tokenizer_config.json").read_text(encoding="utf-8"))
    pre = tok_json["pre_tokenizer"]
    # Plain ByteLevel with its own regex is GPT-2's pre-tokenizer, not Qwen2's Split.
    assert pre["type"] == "ByteLevel" and pre["use_regex"], pre
    directory = write_fixture("tiny-qwen2", tok_json, config)
    tokens, types, merges = byte_level_vocab(tok_json)
    special = token_ids(tokens, config, {"bos": "bos_token", "eos": "eos_token",
                                         "pad": "pad_token"})
    write_gguf(directory / "tokenizer.gguf", "qwen2", "gpt2", "gpt-2", tokens, types,
               merges=merges, special=special, add_bos=False,
               chat_template=config["chat_template"])

    # SmolLM: every digit on its own, then GPT-2's regex.
    tok_json["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": True}]}
    directory = write_fixture("smollm", tok_json, None)
    write_gguf(directory / "tokenizer.gguf", "llama", "gpt2", "smollm", tokens, types,
               merges=merges, special=special, add_bos=False)


def train_byte_level(regex: str, vocab_size: int, normalizer=None) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_corpus().splitlines(keepends=True), trainer=trainer)
    return tok


def llama3():
    tok = train_byte_level(LLAMA3_REGEX, 1498)
    # Llama 3 takes a word that is a token whole, whatever the merges say. Its vocabulary
    # (made by tiktoken) has words no merge leads to; two such words here show the difference.
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = True
    unmerged = {" Pagoda": "ĠPagoda", " GGUF": "ĠGGUF"}
    for word in unmerged.values():
        assert word not in data["model"]["vocab"], word
        data["model"]["vocab"][word] = len(data["model"]["vocab"])
    tok = Tokenizer.from_str(json.dumps(data))
    data["model"]["ignore_merges"] = False
    merging = Tokenizer.from_str(json.dumps(data))
    for text in unmerged:
        assert len(tok.encode(text).ids) == 1 < len(merging.encode(text).ids), text
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                "<|python_tag|>"]
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
    tok.add_tokens([AddedToken("<tool_call>", normalized=False, special=False)])
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
        special_tokens=[(bos, tok.token_to_id(bos))])
    template = (TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(encoding="utf-8")
    config = {"bos_token": bos, "eos_token": "<|end_of_text|>", "chat_template": template}
    directory = write_fixture("llama3", tok, config)
    tokens, types, merges = byte_level_vocab(json.loads(tok.to_str()))
    special = {"bos": tok.token_to_id(bos), "eos": tok.token_to_id("<|end_of_text|>"),
               "eot": tok.token_to_id("<|eot_id|>"), "eom": tok.token_to_id("<|eom_id|>")}
    write_gguf(directory / "tokenizer.gguf", "llama", "gpt2", "llama-bpe", tokens, types,
               merges=merges, special=special, add_bos=True, add_eos=False,
               chat_template=template)


def qwen2():
    tok = train_byte_level(QWEN2_REGEX, 1200, normalizer=normalizers.NFC())
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t in ["<think>", "</think>"]])
    template = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "chat_template": template}
    directory = write_fixture("qwen2", tok, config)
    tokens, types, merges = byte_level_vocab(json.loads(tok.to_str()))
    special = token_ids(tokens, config, {"eos": "eos_token", "pad": "pad_token"})
    write_gguf(directory / "tokenizer.gguf", "qwen2", "gpt2", "qwen2", tokens, types,
               merges=merges, special=special, add_bos=False, chat_template=template)


def sentencepiece_fixture():
    user_defined = ["<tool>", "</tool>"]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text(training_corpus(), encoding="utf-8")
        # Llama's trainer settings: BPE, byte fallback, digits split, text left as it is.
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(Path(tmp) / "m"), model_type="bpe",
            vocab_size=1200, byte_fallback=True, split_digits=True,
            normalization_rule_name="identity", remove_extra_whitespaces=False,
            allow_whitespace_only_pieces=True, character_coverage=0.9995,
            user_defined_symbols=user_defined, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            num_threads=1, minloglevel=2, max_sentence_length=100000)
        sp = spm.SentencePieceProcessor(model_file=str(Path(tmp) / "m.model"))

    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    scores = [sp.get_score(i) for i in range(sp.get_piece_size())]

    def piece_type(i: int) -> int:
        if sp.is_unknown(i):
            return UNKNOWN
        if sp.is_control(i):
            return CONTROL
        if sp.is_byte(i):
            return BYTE
        if sp.is_unused(i):
            return UNUSED
        return USER_DEFINED if pieces[i] in user_defined else NORMAL

    types = [piece_type(i) for i in range(len(pieces))]

    # transformers' conversion of a Llama SentencePiece BPE model.
    vocab = {piece: i for i, piece in enumerate(pieces)}
    merges = generate_merges(vocab, list(zip(pieces, scores)))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(p, normalized=False, special=True)
                            for i, p in enumerate(pieces) if types[i] in (UNKNOWN, CONTROL)])
    tok.add_tokens([AddedToken(p, normalized=False, special=False)
                    for i, p in enumerate(pieces) if types[i] == USER_DEFINED])

    # The reference itself checked against SentencePiece on plain lines.
    lines = [line for line in MULTILINGUAL.splitlines() + training_corpus().splitlines()[:400]
             if line and not any(u in line for u in user_defined)]
    same = sum(sp.encode(line) == tok.encode(line, add_special_tokens=False).ids
               for line in lines)
    print(f"spm: tokenizer.json encodes {same}/{len(lines)} lines as SentencePiece does")

    directory = write_fixture("spm", tok, None)
    write_gguf(directory / "tokenizer.gguf", "llama", "llama", "default", pieces, types,
               scores=scores, special={"bos": 1, "eos": 2, "unk": 0}, add_bos=True,
               add_eos=False, add_space_prefix=True)


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    tiny_qwen2()
    llama3()
    qwen2()
    sentencepiece_fixture()
    for path in sorted(OUT.rglob("*")):
        if path.is_file():
            print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
