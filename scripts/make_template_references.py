#!/usr/bin/env python3
"""Render every chat template under testdata/chat_templates/templates/ with transformers.

Writes testdata/chat_templates/references.json, which tests/chat_templates.rs in pagoda-text
compares Pagoda's renderer against. Run by hand after adding templates or message sets:

    pip install transformers jinja2
    python3 scripts/make_template_references.py

The templates themselves are data copied from llama.cpp's models/templates/ (vendored in the
llama-cpp-python sdist). Rendering goes through `PreTrainedTokenizer.apply_chat_template`
with tokenize=False on the tiny-qwen2 test tokenizer, whose chat template, bos and eos tokens
are swapped per template. `strftime_now` is pinned to FIXED_NOW so the references are stable;
the Rust test pins Pagoda's clock to the same instant.
"""

import datetime as real_datetime
import json
import sys
from pathlib import Path

import transformers
from transformers import AutoTokenizer
from transformers.utils import chat_template_utils

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "testdata" / "chat_templates" / "templates"
OUTPUT = ROOT / "testdata" / "chat_templates" / "references.json"
TOKENIZER = ROOT / "testdata" / "models" / "tiny-qwen2"

FIXED_NOW = real_datetime.datetime(2026, 1, 15, 9, 30, 5)


class _FixedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


# `strftime_now` looks `datetime` up in this module each time it is called.
chat_template_utils.datetime = _FixedDatetime

# Special tokens by template-name prefix; the first match wins. Wrong tokens would still give
# consistent references, but realistic ones make the expected strings readable.
SPECIAL_TOKENS = [
    ("meta-llama", "<|begin_of_text|>", "<|eot_id|>"),
    ("fireworks-ai-llama-3", "<|begin_of_text|>", "<|eot_id|>"),
    ("NousResearch", "<|begin_of_text|>", "<|im_end|>"),
    ("meetkai", "<|begin_of_text|>", "<|eot_id|>"),
    ("deepseek-ai-DeepSeek-R1-Distill", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("deepseek-ai", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("llama-cpp-deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("google-gemma", "<bos>", "<eos>"),
    ("Qwen", "<|endoftext|>", "<|im_end|>"),
    ("CohereForAI", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("Cohere2", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("microsoft-Phi", "<s>", "<|endoftext|>"),
    ("ByteDance-Seed", "<seed:bos>", "<seed:eos>"),
]
DEFAULT_TOKENS = ("<s>", "</s>")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]

# Tool-call ids are nine alphanumerics because Mistral templates insist on that shape.
MESSAGE_SETS = {
    "system_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "Name a prime number."},
    ],
    "tool_call": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call00001",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "22 degrees, sunny"},
    ],
    # What OpenAI clients often send: an empty string rather than no content.
    "tool_call_empty_content": None,  # filled in below
    "multi_part": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe this "},
                {"type": "text", "text": "in one word: ünïcode ✓"},
            ],
        },
    ],
    "continue_assistant": [
        {"role": "user", "content": "Write a haiku about rain."},
        {"role": "assistant", "content": "Soft rain on the roof"},
    ],
}

MESSAGE_SETS["tool_call_empty_content"] = json.loads(json.dumps(MESSAGE_SETS["tool_call"]))
MESSAGE_SETS["tool_call_empty_content"][1]["content"] = ""

CASES = [
    ("system_user", {"add_generation_prompt": True}),
    ("system_user", {"add_generation_prompt": False}),
    ("system_user", {"add_generation_prompt": True, "extra": {"enable_thinking": False}}),
    ("multi_turn", {"add_generation_prompt": True}),
    ("multi_turn", {"add_generation_prompt": False}),
    ("tool_call", {"add_generation_prompt": True, "tools": TOOLS}),
    ("tool_call_empty_content", {"add_generation_prompt": True, "tools": TOOLS}),
    ("multi_part", {"add_generation_prompt": True}),
    ("continue_assistant", {"continue_final_message": True}),
]


def special_tokens(template_name):
    for prefix, bos, eos in SPECIAL_TOKENS:
        if template_name.startswith(prefix):
            return bos, eos
    return DEFAULT_TOKENS


def render(tokenizer, messages, options):
    return tokenizer.apply_chat_template(
        json.loads(json.dumps(messages)),  # a fresh copy; transformers may edit the last message
        tokenize=False,
        add_generation_prompt=options.get("add_generation_prompt", False),
        continue_final_message=options.get("continue_final_message", False),
        tools=options.get("tools"),
        **options.get("extra", {}),
    )


def main():
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    # Only bos/eos reach the template context, as in Pagoda.
    tokenizer.pad_token = None
    tokenizer.unk_token = None
    templates = sorted(TEMPLATES.glob("*.jinja"))
    cases = []
    errors = 0
    for path in templates:
        bos, eos = special_tokens(path.stem)
        tokenizer.bos_token = bos
        tokenizer.eos_token = eos
        tokenizer.chat_template = path.read_text(encoding="utf-8")
        for set_name, options in CASES:
            case = {
                "template": path.name,
                "bos_token": bos,
                "eos_token": eos,
                "messages_set": set_name,
                "options": options,
            }
            try:
                case["expected"] = render(tokenizer, MESSAGE_SETS[set_name], options)
            except Exception as e:  # noqa: BLE001 - any failure in Python is a reference too
                case["expected_error"] = f"{type(e).__name__}: {e}"
                errors += 1
            cases.append(case)
    out = {
        "generated_by": "scripts/make_template_references.py",
        "transformers_version": transformers.__version__,
        "fixed_now": FIXED_NOW.isoformat(),
        "message_sets": MESSAGE_SETS,
        "cases": cases,
    }
    OUTPUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(templates)} templates, {len(cases)} cases ({errors} expected errors) -> {OUTPUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
