"""Structured outputs through the official `openai` Python SDK, validated with `jsonschema`.

Usage: python3 test_structured_sdk.py BASE_URL
The server runs a tiny random-weight model: unconstrained it writes gibberish, so every
output that parses and validates here does so because decoding was constrained.
"""

import json
import re
import sys
from typing import Literal, Optional

import jsonschema
import openai
from pydantic import BaseModel, Field

SEEDS = range(100)


class Address(BaseModel):
    city: str = Field(max_length=10)
    zip: str = Field(pattern=r"^[0-9]{5}$")


class Person(BaseModel):
    name: str = Field(max_length=12)
    age: int = Field(ge=0, le=120)
    role: Literal["admin", "user", "guest"]
    address: Address
    nickname: Optional[str] = Field(default=None, max_length=6)


def messages(text="Describe a person as JSON."):
    return [{"role": "user", "content": text}]


def check_parse(client, model):
    names = set()
    for seed in SEEDS:
        done = client.chat.completions.parse(
            model=model, messages=messages(), response_format=Person,
            temperature=1.0, seed=seed, max_tokens=300,
        )
        choice = done.choices[0]
        assert choice.finish_reason == "stop", (seed, choice.message.content)
        person = choice.message.parsed
        assert isinstance(person, Person), (seed, choice.message.content)
        names.add(person.name)
    assert len(names) > 10, names


def check_parse_streamed(client, model):
    for seed in range(20):
        with client.chat.completions.stream(
            model=model, messages=messages(), response_format=Person,
            temperature=1.0, seed=seed, max_tokens=300,
        ) as stream:
            deltas = sum(1 for event in stream if event.type == "content.delta")
            final = stream.get_final_completion()
        assert deltas > 1, deltas
        assert isinstance(final.choices[0].message.parsed, Person), final.choices[0].message.content


def check_schemas_on_both_endpoints(client, model):
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                      "minItems": 1, "maxItems": 3},
            "ok": {"type": "boolean"},
            "note": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]},
        },
        "required": ["items", "ok"],
        "additionalProperties": False,
    }
    for seed in SEEDS:
        chat = client.chat.completions.create(
            model=model, messages=messages(), temperature=1.0, seed=seed, max_tokens=200,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}},
        )
        jsonschema.validate(json.loads(chat.choices[0].message.content), schema)
        text = client.completions.create(
            model=model, prompt="JSON:", temperature=1.0, seed=seed, max_tokens=200,
            extra_body={"structured_outputs": {"json": schema}},
        ).choices[0].text
        jsonschema.validate(json.loads(text), schema)
        old = client.completions.create(
            model=model, prompt="JSON:", temperature=1.0, seed=seed, max_tokens=200,
            extra_body={"guided_json": json.dumps(schema)},
        ).choices[0].text
        jsonschema.validate(json.loads(old), schema)


def check_regex_choice_grammar(client, model):
    for seed in SEEDS:
        out = client.chat.completions.create(
            model=model, messages=messages("A date?"), temperature=1.0, seed=seed, max_tokens=50,
            extra_body={"structured_outputs": {"regex": r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]"}},
        ).choices[0].message.content
        assert re.fullmatch(r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]", out), out
        pick = client.completions.create(
            model=model, prompt="Sentiment:", temperature=1.0, seed=seed, max_tokens=20,
            extra_body={"guided_choice": ["positive", "negative"]},
        ).choices[0].text
        assert pick in ("positive", "negative"), pick
        expr = client.completions.create(
            model=model, prompt="Sum:", temperature=1.0, seed=seed, max_tokens=40,
            extra_body={"structured_outputs": {"grammar": 'start: num ("+" num){0,3}\nnum: /[1-9][0-9]?/'}},
        ).choices[0].text
        assert re.fullmatch(r"[1-9][0-9]?(\+[1-9][0-9]?){0,3}", expr), expr
    obj = client.chat.completions.create(
        model=model, messages=messages(), temperature=0, max_tokens=400,
        response_format={"type": "json_object"},
    ).choices[0]
    if obj.finish_reason == "stop":
        assert isinstance(json.loads(obj.message.content), dict)
    else:
        assert obj.message.content.startswith("{")


class GetWeather(BaseModel):
    city: str = Field(max_length=10)
    unit: Literal["c", "f"]


class FetchUrl(BaseModel):
    url: str = Field(pattern=r"^https://[a-z]{1,8}\.example/$")


def check_tool_calls(client, model):
    tools = [openai.pydantic_function_tool(GetWeather), openai.pydantic_function_tool(FetchUrl)]
    for seed in range(30):
        done = client.chat.completions.parse(
            model=model, messages=messages("Weather in Oslo?"), tools=tools, tool_choice="required",
            parallel_tool_calls=False, temperature=1.0, seed=seed, max_tokens=200,
        )
        choice = done.choices[0]
        assert choice.finish_reason == "tool_calls", (seed, choice)
        (call,) = choice.message.tool_calls
        assert call.id and call.type == "function"
        assert isinstance(call.function.parsed_arguments, (GetWeather, FetchUrl)), call
        assert type(call.function.parsed_arguments).__name__ == call.function.name
    named = {"type": "function", "function": {"name": "FetchUrl"}}
    for seed in range(10):
        stream = client.chat.completions.create(
            model=model, messages=messages("Fetch it."), tools=tools, tool_choice=named,
            temperature=1.0, seed=seed, max_tokens=200, stream=True,
        )
        calls, finish = {}, None
        for chunk in stream:
            for c in chunk.choices:
                finish = c.finish_reason or finish
                for tc in c.delta.tool_calls or []:
                    entry = calls.setdefault(tc.index, {"name": None, "arguments": ""})
                    if tc.function.name:
                        assert tc.id, "the first delta of a call carries its id"
                        entry["name"] = tc.function.name
                    entry["arguments"] += tc.function.arguments or ""
        assert finish == "tool_calls", finish
        assert [c["name"] for c in calls.values()] == ["FetchUrl"], calls
        FetchUrl.model_validate_json(calls[0]["arguments"])


def check_errors(client, model):
    bad = [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}},
         "response_format"),
        ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs.regex"),
        ({"guided_grammar": "start: missing_rule"}, "guided_grammar"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
    ]
    for extra, param in bad:
        try:
            client.chat.completions.create(model=model, messages=messages(), max_tokens=5, extra_body=extra)
            raise AssertionError(f"expected a 400 for {extra}")
        except openai.BadRequestError as e:
            assert e.status_code == 400
            assert e.body["param"] == param, (e.body, param)


def main():
    base = sys.argv[1].rstrip("/")
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    check_parse(client, model)
    check_parse_streamed(client, model)
    check_schemas_on_both_endpoints(client, model)
    check_regex_choice_grammar(client, model)
    check_tool_calls(client, model)
    check_errors(client, model)
    print("structured outputs through the SDK: ok")


if __name__ == "__main__":
    main()
