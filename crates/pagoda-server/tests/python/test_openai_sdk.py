"""Conformance with the official `openai` Python SDK.

Usage: python3 test_openai_sdk.py BASE_URL [BUSY_BASE_URL]   (e.g. http://127.0.0.1:8000)
BUSY_BASE_URL, if given, is a server admitting a single request, for the 429 check.
Exits 0 when every check passes. Run by tests/openai_sdk.rs against an in-process server.
"""

import sys

import openai


def check_chat(client, model):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}]
    whole = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0)
    assert whole.object == "chat.completion"
    choice = whole.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    usage = whole.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens >= 0

    stream = client.chat.completions.create(
        model=model, messages=messages, max_tokens=16, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, final_usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            final_usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == choice.message.content, (text, choice.message.content)
    assert finish == choice.finish_reason
    assert final_usage.completion_tokens == usage.completion_tokens


def check_n_logprobs_stop(client, model):
    messages = [{"role": "user", "content": "Hi"}]
    two = client.chat.completions.create(model=model, messages=messages, max_tokens=6, n=2, seed=3)
    assert [c.index for c in two.choices] == [0, 1]

    lp = client.chat.completions.create(
        model=model, messages=messages, max_tokens=4, temperature=0, logprobs=True, top_logprobs=3,
        extra_body={"ignore_eos": True},
    )
    content = lp.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
    assert "".join(e.token for e in content) == lp.choices[0].message.content

    free = client.completions.create(model=model, prompt="The", max_tokens=12, temperature=0,
                                     extra_body={"ignore_eos": True})
    text = free.choices[0].text
    stop = text[3:5]
    stopped = client.completions.create(model=model, prompt="The", max_tokens=12, temperature=0, stop=[stop],
                                        extra_body={"ignore_eos": True})
    assert stopped.choices[0].text == text[: text.index(stop)]
    assert stopped.choices[0].finish_reason == "stop"


def check_completions(client, model):
    whole = client.completions.create(model=model, prompt="Once upon a time", max_tokens=10, temperature=0,
                                      logprobs=2)
    assert whole.object == "text_completion"
    assert len(whole.choices[0].logprobs.tokens) == whole.usage.completion_tokens
    stream = client.completions.create(model=model, prompt="Once upon a time", max_tokens=10, temperature=0,
                                       stream=True)
    text = "".join(c.choices[0].text for c in stream if c.choices)
    assert text == whole.choices[0].text
    many = client.completions.create(model=model, prompt=["a", "b"], max_tokens=2, n=2)
    assert len(many.choices) == 4


def check_errors(client, model):
    def expect(exc_type, fn):
        try:
            fn()
        except exc_type as e:
            assert e.status_code in (400, 404, 429), e
            body = e.body if isinstance(e.body, dict) else {}
            return body.get("error", body)
        raise AssertionError(f"expected {exc_type.__name__}")

    messages = [{"role": "user", "content": "Hi"}]
    expect(openai.NotFoundError, lambda: client.chat.completions.create(model="nope", messages=messages))
    err = expect(openai.BadRequestError,
                 lambda: client.chat.completions.create(model=model, messages=messages, temperature=-1))
    assert err["param"] == "temperature", err
    err = expect(openai.BadRequestError,
                 lambda: client.completions.create(model=model, prompt="Hi", max_tokens=100000))
    assert err["code"] == "context_length_exceeded", err


def check_rate_limit(base):
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": "Hi"}]
    hog = client.chat.completions.create(model=model, messages=messages, max_tokens=400, stream=True,
                                         extra_body={"ignore_eos": True})
    next(iter(hog))
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=2)
        raise AssertionError("expected RateLimitError")
    except openai.RateLimitError as e:
        assert e.status_code == 429
        assert e.response.headers.get("retry-after") == "1"
    finally:
        hog.close()


def main():
    base = sys.argv[1].rstrip("/")
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    models = client.models.list().data
    model = models[0].id
    assert client.models.retrieve(model).id == model
    check_chat(client, model)
    check_n_logprobs_stop(client, model)
    check_completions(client, model)
    check_errors(client, model)
    if len(sys.argv) > 2:
        check_rate_limit(sys.argv[2].rstrip("/"))
    print("openai SDK conformance: ok")


if __name__ == "__main__":
    main()
