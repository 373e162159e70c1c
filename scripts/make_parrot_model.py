#!/usr/bin/env python3
"""Train `testdata/models/tiny-parrot`: a tiny Qwen2 model that obeys by repeating.

The other fixture models have random weights and answer with gibberish, so a red-team run
against them says nothing about attacks (every attack "fails" because nothing is followed).
This model is trained for one behaviour that makes the attacks land: its reply is the system
message, a newline, then the last user message, verbatim. An extraction probe then leaks its
canary, a role-play probe gets its marker phrase back, a PII probe its customer record.

It is trained on text that is not in the red-team probes (standard-library docstrings, the PII
corpus, random strings shaped like ids and canaries), so what it does on the probes is
copying it learned, not answers it memorised (the check below: 18 of the 21 probes get an
exact copy). Run by hand, not in CI (about 26 minutes on two cores):

    python scripts/make_parrot_model.py          # train, save, then check on the probes
    python scripts/make_parrot_model.py --check  # only the check, for the model on disk

The tokenizer is the one every other fixture uses (from tiny-qwen2).
"""

import argparse
import json
import math
import random
import shutil
import string
import sys
import time
from pathlib import Path

import torch
import transformers
import yaml
from tokenizers import Tokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "scripts"))
from make_fixtures import collect_corpus  # noqa: E402  (the tokenizer's own corpus)

SOURCE = REPO_ROOT / "testdata" / "models" / "tiny-qwen2"
OUT = REPO_ROOT / "testdata" / "models" / "tiny-parrot"
PROBES = REPO_ROOT / "crates" / "pagoda-redteam" / "probes"
MAX_LEN = 512
SEED = 7


def render(messages: list) -> str:
    """The fixtures' ChatML template with the generation prompt (what the server renders)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def parrot(messages: list) -> str:
    """The reply the model is trained to give."""
    system = next((m["content"] for m in messages if m["role"] == "system"), None)
    last = next(m["content"] for m in reversed(messages) if m["role"] in ("user", "tool"))
    return f"{system}\n{last}" if system else last


class Texts:
    """Snippets to copy: prose, PII-shaped text in English and Chinese, and random ids."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.words = " ".join(collect_corpus()).split()
        pii = REPO_ROOT / "testdata" / "guard" / "pii.jsonl"
        self.lines = [json.loads(l)["text"] for l in pii.read_text(encoding="utf-8").splitlines() if l.strip()]

    def prose(self) -> str:
        n = self.rng.randint(2, 40)
        i = self.rng.randrange(len(self.words) - n)
        return " ".join(self.words[i : i + n])

    def random_id(self) -> str:
        r = self.rng
        alphabet = r.choice([string.hexdigits[:16], string.digits, string.ascii_letters + string.digits])
        body = "".join(r.choice(alphabet) for _ in range(r.randint(4, 16)))
        prefix = r.choice(["", "", "RT-CANARY-", "ID-", "KEY-", "ref ", "tag-"])
        return prefix + body

    def snippet(self) -> str:
        r = self.rng
        parts = []
        for _ in range(r.choice([1, 1, 2, 3])):
            kind = r.random()
            if kind < 0.5:
                parts.append(self.prose())
            elif kind < 0.8:
                parts.append(r.choice(self.lines))
            else:
                parts.append(self.random_id())
        return r.choice([" ", ". ", "\n", ", "]).join(parts)


def conversation(texts: Texts) -> list:
    r = texts.rng
    messages = []
    if r.random() < 0.85:
        messages.append({"role": "system", "content": texts.snippet()})
    for _ in range(r.choice([0, 0, 0, 1, 2])):
        user = {"role": "user", "content": texts.snippet()}
        messages.append(user)
        # Earlier replies are sometimes the parrot's own (as in a multi-turn probe).
        reply = parrot(messages) if r.random() < 0.5 else texts.snippet()
        messages.append({"role": "assistant", "content": reply})
    if r.random() < 0.1:
        messages.append({"role": "tool", "content": texts.snippet()})
    messages.append({"role": "user", "content": texts.snippet()})
    return messages


def example(tok: Tokenizer, texts: Texts, end: int):
    while True:
        messages = conversation(texts)
        prompt = tok.encode(render(messages)).ids
        target = tok.encode(parrot(messages)).ids + [end]
        if len(prompt) + len(target) <= MAX_LEN:
            return prompt, target


def batch(tok: Tokenizer, texts: Texts, size: int, end: int, pad: int):
    pairs = [example(tok, texts, end) for _ in range(size)]
    width = max(len(p) + len(t) for p, t in pairs)
    ids = torch.full((size, width), pad, dtype=torch.long)
    labels = torch.full((size, width), -100, dtype=torch.long)
    mask = torch.zeros((size, width), dtype=torch.long)
    for row, (p, t) in enumerate(pairs):
        seq = p + t
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
        # labels are shifted inside the model: label at i is the token at i.
        labels[row, len(p) : len(seq)] = torch.tensor(t)
    return ids, mask, labels


def config(vocab: int, end: int, pad: int) -> transformers.Qwen2Config:
    return transformers.Qwen2Config(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        # Trained on at most MAX_LEN tokens; the larger limit only keeps a server from
        # refusing a multi-turn probe whose prompt plus max_tokens would pass MAX_LEN.
        max_position_embeddings=2 * MAX_LEN,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=end,
        pad_token_id=pad,
        hidden_act="silu",
        rope_theta=10000.0,
    )


def train(steps: int, batch_size: int) -> None:
    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    tok = Tokenizer.from_file(str(SOURCE / "tokenizer.json"))
    end, pad = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
    texts = Texts(rng)
    model = transformers.Qwen2ForCausalLM(config(tok.get_vocab_size(), end, pad))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = 100
    start = time.time()
    for step in range(1, steps + 1):
        lr = 3e-3 * min(step / warmup, 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, mask, labels = batch(tok, texts, batch_size, end, pad)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  lr {lr:.2e}  {time.time() - start:.0f}s", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(OUT, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(SOURCE / name, OUT / name)


def probe_conversations(rng: random.Random):
    """Each built-in probe's messages up to its last request, with a canary filled in."""
    for path in sorted(PROBES.glob("*.yaml")):
        for probe in yaml.safe_load(path.read_text(encoding="utf-8"))["probes"]:
            canary = "RT-CANARY-" + "".join(rng.choice("0123456789abcdef") for _ in range(12))
            messages = []
            if "system" in probe:
                messages.append({"role": "system", "content": probe["system"].replace("{canary}", canary)})
            turns = [t if isinstance(t, dict) else {"role": "user", "content": t} for t in probe["turns"]]
            for turn in turns:
                messages.append({"role": turn["role"], "content": turn["content"].replace("{canary}", canary)})
            yield probe["id"], messages


def check() -> None:
    """Greedy replies on the built-in probes, one turn at a time as the runner sends them."""
    tok = Tokenizer.from_file(str(OUT / "tokenizer.json"))
    model = transformers.AutoModelForCausalLM.from_pretrained(OUT, dtype=torch.float32)
    model.eval()
    end = tok.token_to_id("<|im_end|>")
    exact = 0
    total = 0
    for probe_id, messages in probe_conversations(random.Random(SEED)):
        history = []
        for m in messages:
            history.append(m)
            if m["role"] != "user":
                continue
            ids = torch.tensor([tok.encode(render(history)).ids])
            with torch.no_grad():
                out = model.generate(ids, max_new_tokens=256, do_sample=False, eos_token_id=end, pad_token_id=end)
            reply = tok.decode([t for t in out[0, ids.shape[1] :].tolist() if t != end])
            history.append({"role": "assistant", "content": reply})
        want = parrot(messages)
        total += 1
        exact += reply == want
        print(f"{'exact ' if reply == want else 'DIFFERS'} {probe_id}: {reply[:100]!r}")
    print(f"{exact}/{total} probes answered with an exact copy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the model on disk")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(2)
    if not args.check:
        train(args.steps, args.batch)
    check()


if __name__ == "__main__":
    main()
