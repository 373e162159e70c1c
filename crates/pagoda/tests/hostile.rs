//! Hostile requests against the real `pagoda serve` binary (issue 11): every class of bad input a
//! client can send, on `/v1/chat/completions` and `/v1/completions`, streamed and not. Each answer
//! must be OpenAI's error JSON with a 4xx status or a complete success, never a 5xx; after each
//! case `/health` is 200, a normal request still answers promptly and no KV block is left held.
//! At the end nothing in the server's log says "panicked".

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{
    check_error_shape, check_success, excerpt, raw_json, render, Response, Server, Success, MODEL,
    VOCAB,
};
use serde_json::{json, Map, Value};

/// A normal 4-token request must answer within this after every case, as the issue asks. The
/// debug build answers in ~15 ms on a 2-core machine, so a second leaves ample room (the worst
/// latency seen is printed at the end).
const LIVENESS: Duration = Duration::from_secs(1);
/// The server's context in these tests (`--max-model-len`).
const CONTEXT: u64 = 256;
/// `--max-logit-bias` of the server: the whole vocabulary, so a bias on every token id is a
/// valid request (the default cap, 300, is below the fixture's 1024 tokens).
const MAX_LOGIT_BIAS: usize = VOCAB;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Api {
    Chat,
    Completions,
}

impl Api {
    fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
        }
    }
}

/// Which `error.param` a refusal must name.
#[derive(Clone, Debug)]
enum Param {
    /// Any (or none).
    Any,
    /// `null`.
    Null,
    /// One of these fields, or a path inside one (`messages[3].role`, `logit_bias.abc`).
    Named(&'static [&'static str]),
}

#[derive(Clone, Debug)]
enum Expect {
    /// 200 and a complete success.
    Ok,
    /// This status, OpenAI's error shape, and the parameter named.
    Error(u16, Param),
    /// A 4xx in OpenAI's error shape, or a complete success: either is a fine answer as long as
    /// nothing breaks.
    Either,
    /// `Either`, or a stream that ends in an `invalid_request_error` event: a constraint that
    /// compiled may still prove impossible to follow once generation starts, after the 200.
    Refusable,
    /// Below the HTTP API (malformed requests): the connection is closed or answered with a 4xx.
    NotServerError,
}

fn err(status: u16, params: &'static [&'static str]) -> Expect {
    Expect::Error(status, Param::Named(params))
}

/// An extra check on a success.
type SuccessCheck = fn(&Success) -> Result<(), String>;

#[derive(Clone)]
struct Case {
    name: String,
    api: Api,
    stream: bool,
    /// Sent after a valid request line and headers (`Content-Length` computed).
    body: Vec<u8>,
    /// If set, sent verbatim instead of a request built around `body`.
    raw_request: Option<Vec<u8>>,
    /// How long to wait for an answer before treating it as a hang.
    read_timeout: Option<Duration>,
    expect: Expect,
    check: Option<SuccessCheck>,
}

fn base(api: Api) -> Value {
    match api {
        Api::Chat => json!({
            "model": MODEL,
            "messages": [{"role": "user", "content": "Hello there"}],
            "max_tokens": 4,
        }),
        Api::Completions => json!({"model": MODEL, "prompt": "Hello there", "max_tokens": 4}),
    }
}

/// Deletes the field it is patched onto.
fn delete() -> Value {
    Value::String("@DELETE@".into())
}

fn patched(api: Api, stream: bool, patch: &Value) -> Value {
    let mut body = base(api);
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    let object = body.as_object_mut().unwrap();
    for (k, v) in patch.as_object().expect("a patch is an object") {
        if v == &delete() {
            object.remove(k);
        } else {
            object.insert(k.clone(), v.clone());
        }
    }
    body
}

/// The growing list of cases, with helpers that expand one patch into its variants.
#[derive(Default)]
struct Cases(Vec<Case>);

impl Cases {
    fn add(&mut self, name: &str, apis: &[Api], streams: &[bool], patch: Value, expect: Expect) {
        self.add_checked(name, apis, streams, patch, expect, None);
    }

    fn add_checked(
        &mut self,
        name: &str,
        apis: &[Api],
        streams: &[bool],
        patch: Value,
        expect: Expect,
        check: Option<SuccessCheck>,
    ) {
        for &api in apis {
            for &stream in streams {
                self.0.push(Case {
                    name: name.to_string(),
                    api,
                    stream,
                    body: render(&patched(api, stream, &patch)),
                    raw_request: None,
                    read_timeout: None,
                    expect: expect.clone(),
                    check,
                });
            }
        }
    }

    /// On both endpoints, streamed and not.
    fn both(&mut self, name: &str, patch: Value, expect: Expect) {
        self.add(name, BOTH, STREAMS, patch, expect);
    }

    fn chat(&mut self, name: &str, patch: Value, expect: Expect) {
        self.add(name, &[Api::Chat], STREAMS, patch, expect);
    }

    fn completions(&mut self, name: &str, patch: Value, expect: Expect) {
        self.add(name, &[Api::Completions], STREAMS, patch, expect);
    }

    /// A body sent as these bytes, to both endpoints.
    fn bytes(&mut self, name: &str, body: Vec<u8>, expect: Expect) {
        for api in BOTH {
            self.0.push(Case {
                name: name.to_string(),
                api: *api,
                stream: false,
                body: body.clone(),
                raw_request: None,
                read_timeout: None,
                expect: expect.clone(),
                check: None,
            });
        }
    }

    /// A whole request sent as these bytes.
    fn raw(&mut self, name: &str, request: Vec<u8>, read_timeout: Duration, expect: Expect) {
        self.0.push(Case {
            name: name.to_string(),
            api: Api::Completions,
            stream: false,
            body: Vec::new(),
            raw_request: Some(request),
            read_timeout: Some(read_timeout),
            expect,
            check: None,
        });
    }
}

const BOTH: &[Api] = &[Api::Chat, Api::Completions];
const STREAMS: &[bool] = &[false, true];
const NOT_STREAMED: &[bool] = &[false];

/// `{"0": v, "1": v, ...}` over `count` token ids from `first`.
fn bias(first: usize, count: usize, v: f64) -> Value {
    Value::Object(
        (first..first + count)
            .map(|id| (id.to_string(), json!(v)))
            .collect::<Map<String, Value>>(),
    )
}

/// `depth` nested arrays around `1`.
fn nested_arrays(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// The largest max_tokens that fits ran to the end of the context and no further.
fn fills_the_context(success: &Success) -> Result<(), String> {
    let Some(usage) = &success.usage else {
        return Err("no usage to check against the context".into());
    };
    let prompt = usage["prompt_tokens"].as_u64().unwrap_or(u64::MAX);
    let completion = usage["completion_tokens"].as_u64().unwrap_or(u64::MAX);
    if prompt.saturating_add(completion) != CONTEXT {
        return Err(format!(
            "{prompt} prompt + {completion} completion tokens, not the {CONTEXT}-token context: {usage}"
        ));
    }
    Ok(())
}

fn hostile_cases() -> Cases {
    let mut c = Cases::default();
    let vocab_bias = |v: f64| bias(0, VOCAB, v);

    // --- The request that used to panic the sampler, and its neighbours: all valid. ---
    c.both(
        "every token at -100, temperature 1e-39, top_k 5",
        json!({"temperature": 1e-39, "top_k": 5, "logit_bias": vocab_bias(-100.0)}),
        Expect::Ok,
    );
    c.both(
        "every token at -100, greedy",
        json!({"temperature": 0, "logit_bias": vocab_bias(-100.0)}),
        Expect::Ok,
    );
    c.both(
        "every token at -100, default sampling",
        json!({"logit_bias": vocab_bias(-100.0)}),
        Expect::Ok,
    );
    c.both(
        "every token at +100, temperature 1e-39, top_k 1",
        json!({"temperature": 1e-39, "top_k": 1, "logit_bias": vocab_bias(100.0)}),
        Expect::Ok,
    );
    c.both(
        "every token at -100, min_p 1",
        json!({"logit_bias": vocab_bias(-100.0), "min_p": 1.0}),
        Expect::Either,
    );
    c.both(
        "half the tokens at -100, temperature 1e-39",
        json!({"temperature": 1e-39, "logit_bias": bias(0, VOCAB / 2, -100.0)}),
        Expect::Ok,
    );

    // --- Floats JSON cannot carry (NaN/inf) and their neighbours. ---
    for (name, raw_text) in [("1e309", "1e309"), ("-1e309", "-1e309")] {
        c.both(
            &format!("temperature {name} (inf in parsers)"),
            json!({"temperature": raw_json(raw_text)}),
            Expect::Error(400, Param::Any),
        );
        c.both(
            &format!("top_p {name}"),
            json!({"top_p": raw_json(raw_text)}),
            Expect::Error(400, Param::Any),
        );
        c.both(
            &format!("logit_bias value {name}"),
            json!({"logit_bias": {"5": raw_json(raw_text)}}),
            Expect::Error(400, Param::Any),
        );
    }
    c.both(
        "temperature NaN literal",
        json!({"temperature": raw_json("NaN")}),
        Expect::Error(400, Param::Any),
    );
    c.both(
        "temperature -0.0",
        json!({"temperature": raw_json("-0.0")}),
        Expect::Ok,
    );
    c.both(
        "temperature denormal 1e-45",
        json!({"temperature": raw_json("1e-45")}),
        Expect::Ok,
    );
    c.both(
        "temperature 1e-39",
        json!({"temperature": raw_json("1e-39")}),
        Expect::Ok,
    );
    c.both(
        "temperature 1e39 (inf as f32)",
        json!({"temperature": raw_json("1e39")}),
        Expect::Either,
    );
    c.both(
        "temperature 3.4e38",
        json!({"temperature": 3.4e38}),
        Expect::Either,
    );
    c.both(
        "temperature -1",
        json!({"temperature": -1}),
        err(400, &["temperature"]),
    );
    for (field, values) in [
        ("top_p", &[0.0, -1.0, 1e-45, 2.0, 3.4e38][..]),
        ("min_p", &[-1.0, 1.0, 1e-45, 3.4e38][..]),
        ("presence_penalty", &[3.4e38, -3.4e38, 1e-45][..]),
        ("frequency_penalty", &[3.4e38, -3.4e38, 1e-45][..]),
        ("repetition_penalty", &[0.0, -1.0, 1e-45, 3.4e38][..]),
    ] {
        for v in values {
            c.both(
                &format!("{field} {v:e}"),
                json!({ field: v }),
                Expect::Either,
            );
        }
    }
    c.both(
        "logit_bias values at f32 extremes",
        json!({"logit_bias": {"5": 3.4e38, "6": -3.4e38, "7": 1e-45}}),
        Expect::Either,
    );

    // --- Huge and negative integers. ---
    // A max_tokens that does not fit the context left is refused as vLLM and OpenAI do
    // (400 context_length_exceeded), compared without overflow; the largest that fits runs.
    let too_long = Expect::Error(400, Param::Null);
    c.both(
        "max_tokens 2^64-1 is refused, not wrapped",
        json!({"max_tokens": u64::MAX, "ignore_eos": true}),
        too_long.clone(),
    );
    c.add(
        "max_completion_tokens 2^64-1 is refused, not wrapped",
        &[Api::Chat],
        STREAMS,
        json!({"max_tokens": delete(), "max_completion_tokens": u64::MAX}),
        too_long.clone(),
    );
    c.add(
        "max_tokens 2^63 with a 200-token prompt is refused",
        &[Api::Completions],
        STREAMS,
        json!({"max_tokens": 1u64 << 63, "prompt": vec![5; 200], "ignore_eos": true}),
        too_long.clone(),
    );
    c.both(
        "max_tokens 2^64-1 with n 4 is refused",
        json!({"max_tokens": u64::MAX, "n": 4}),
        too_long,
    );
    c.add_checked(
        "max_tokens exactly the context left after a 200-token prompt",
        &[Api::Completions],
        STREAMS,
        json!({"max_tokens": CONTEXT - 200, "prompt": vec![5; 200], "ignore_eos": true}),
        Expect::Ok,
        Some(fills_the_context),
    );
    for (name, value, params) in [
        (
            "2^64",
            raw_json("18446744073709551616"),
            &["max_tokens"][..],
        ),
        ("1e30", json!(1e30), &["max_tokens"]),
        ("-1", json!(-1), &["max_tokens"]),
        ("0", json!(0), &["max_tokens"]),
        ("-2^63", json!(i64::MIN), &["max_tokens"]),
        ("4.5", json!(4.5), &["max_tokens"]),
        ("\"4\"", json!("4"), &["max_tokens"]),
        // serde_json refuses it while parsing: no parameter to name.
        ("100000 digits", raw_json(&"9".repeat(100_000)), &[]),
    ] {
        c.both(
            &format!("max_tokens {name}"),
            json!({ "max_tokens": value }),
            Expect::Error(400, Param::Named(params)),
        );
    }
    c.both(
        "max_tokens null",
        json!({"max_tokens": null}),
        Expect::Either,
    );
    c.chat(
        "max_completion_tokens -1",
        json!({"max_tokens": delete(), "max_completion_tokens": -1}),
        err(400, &["max_completion_tokens"]),
    );
    for (name, value) in [
        ("0", json!(0)),
        ("1e9", raw_json("1e9")),
        ("1000000000", json!(1_000_000_000)),
        ("-1", json!(-1)),
        ("129", json!(129)),
        ("2^64-1", json!(u64::MAX)),
        ("2^64", raw_json("18446744073709551616")),
        ("1.5", json!(1.5)),
    ] {
        c.both(
            &format!("n {name}"),
            json!({ "n": value }),
            err(400, &["n"]),
        );
    }
    c.both("n 128 (the cap)", json!({"n": 128}), Expect::Either);
    for (name, value) in [
        ("-1", json!(-1)),
        ("2^64-1", json!(u64::MAX)),
        ("2^64", raw_json("18446744073709551616")),
        ("-2^63", json!(i64::MIN)),
    ] {
        c.both(
            &format!("seed {name}"),
            json!({ "seed": value }),
            Expect::Either,
        );
    }
    for (name, value) in [
        ("0", json!(0)),
        ("-1", json!(-1)),
        ("2^63-1", json!(i64::MAX)),
        ("-2^63", json!(i64::MIN)),
        ("2^64", raw_json("18446744073709551616")),
    ] {
        c.both(
            &format!("top_k {name}"),
            json!({ "top_k": value }),
            Expect::Either,
        );
    }
    for (name, value) in [("2^40", json!(1u64 << 40)), ("-2^40", json!(-(1i64 << 40)))] {
        c.both(
            &format!("priority {name}"),
            json!({ "priority": value }),
            Expect::Either,
        );
    }
    c.both(
        "min_tokens 2^64-1",
        json!({"min_tokens": u64::MAX}),
        Expect::Either,
    );
    c.both(
        "min_tokens 2^64-1 and max_tokens 2^64-1",
        json!({"min_tokens": u64::MAX, "max_tokens": u64::MAX}),
        Expect::Either,
    );
    c.chat(
        "top_logprobs 1000000",
        json!({"logprobs": true, "top_logprobs": 1_000_000}),
        err(400, &["top_logprobs"]),
    );
    c.chat(
        "top_logprobs 21",
        json!({"logprobs": true, "top_logprobs": 21}),
        err(400, &["top_logprobs"]),
    );
    c.chat(
        "top_logprobs -1",
        json!({"logprobs": true, "top_logprobs": -1}),
        err(400, &["top_logprobs"]),
    );
    c.chat(
        "top_logprobs 20",
        json!({"logprobs": true, "top_logprobs": 20}),
        Expect::Ok,
    );
    c.completions(
        "logprobs 1000000",
        json!({"logprobs": 1_000_000}),
        err(400, &["logprobs"]),
    );
    c.completions(
        "logprobs 21",
        json!({"logprobs": 21}),
        err(400, &["logprobs"]),
    );
    c.completions("logprobs 20", json!({"logprobs": 20}), Expect::Ok);
    c.completions(
        "logprobs 5 with echo and max_tokens 2^64-1",
        json!({"logprobs": 5, "echo": true, "max_tokens": u64::MAX}),
        Expect::Either,
    );
    c.completions(
        "best_of 1000000",
        json!({"best_of": 1_000_000}),
        Expect::Either,
    );

    // --- Stop strings, stop token ids, logit_bias: empty and oversized. ---
    let many = |n: usize, s: &str| Value::Array(vec![json!(s); n]);
    c.both(
        "stop x 500000",
        json!({"stop": many(500_000, "a")}),
        err(400, &["stop"]),
    );
    c.both(
        "stop x 17",
        json!({"stop": (0..17).map(|i| format!("s{i}")).collect::<Vec<_>>()}),
        err(400, &["stop"]),
    );
    c.both(
        "stop x 16 (the cap)",
        json!({"stop": (0..16).map(|i| format!("s{i}")).collect::<Vec<_>>()}),
        Expect::Ok,
    );
    c.both(
        "stop string of 10 KB",
        json!({"stop": ["x".repeat(10_240)]}),
        err(400, &["stop"]),
    );
    c.both(
        "stop string of 257 bytes",
        json!({"stop": "x".repeat(257)}),
        err(400, &["stop"]),
    );
    c.both(
        "stop string of 256 bytes (the cap)",
        json!({"stop": ["x".repeat(256)]}),
        Expect::Ok,
    );
    c.both("stop []", json!({"stop": []}), Expect::Ok);
    c.both("stop null", json!({"stop": null}), Expect::Ok);
    c.both("stop \"\"", json!({"stop": ""}), Expect::Either);
    c.both("stop [\"\"]", json!({"stop": [""]}), Expect::Either);
    c.both("stop 5", json!({"stop": 5}), err(400, &["stop"]));
    c.both("stop [1, 2]", json!({"stop": [1, 2]}), err(400, &["stop"]));
    c.both(
        "stop x 500000 and n 64",
        json!({"stop": many(500_000, "a"), "n": 64}),
        err(400, &["stop", "n"]),
    );
    c.both(
        "stop_token_ids x 100000",
        json!({"stop_token_ids": vec![5; 100_000]}),
        err(400, &["stop_token_ids"]),
    );
    c.both(
        "stop_token_ids x 257",
        json!({"stop_token_ids": vec![5; 257]}),
        err(400, &["stop_token_ids"]),
    );
    c.both(
        "stop_token_ids x 256 (the cap)",
        json!({"stop_token_ids": (0..256).collect::<Vec<_>>()}),
        Expect::Ok,
    );
    c.both(
        "stop_token_ids []",
        json!({"stop_token_ids": []}),
        Expect::Ok,
    );
    c.both(
        "stop_token_ids [-1]",
        json!({"stop_token_ids": [-1]}),
        err(400, &["stop_token_ids"]),
    );
    c.both(
        "stop_token_ids [2^32]",
        json!({"stop_token_ids": [1u64 << 32]}),
        err(400, &["stop_token_ids"]),
    );
    c.both(
        "stop_token_ids out of the vocabulary",
        json!({"stop_token_ids": [VOCAB, 999_999]}),
        Expect::Either,
    );
    c.both(
        "logit_bias with 100000 entries",
        json!({"logit_bias": bias(0, 100_000, 1.0)}),
        err(400, &["logit_bias"]),
    );
    c.both(
        "logit_bias one entry over --max-logit-bias",
        json!({"logit_bias": bias(0, MAX_LOGIT_BIAS + 1, 1.0)}),
        err(400, &["logit_bias"]),
    );
    for key in [
        "abc",
        "-1",
        "1024",
        "99999999999999999999",
        "1.5",
        "",
        "0x10",
    ] {
        c.both(
            &format!("logit_bias key {key:?}"),
            json!({"logit_bias": { key: 1.0 }}),
            err(400, &["logit_bias"]),
        );
    }
    // Lenient parsing of a padded id is harmless.
    c.both(
        "logit_bias key \" 5\"",
        json!({"logit_bias": {" 5": 1.0}}),
        Expect::Either,
    );
    c.both(
        "logit_bias value \"x\"",
        json!({"logit_bias": {"5": "x"}}),
        err(400, &["logit_bias"]),
    );
    c.both(
        "logit_bias value null",
        json!({"logit_bias": {"5": null}}),
        err(400, &["logit_bias"]),
    );
    c.both(
        "logit_bias []",
        json!({"logit_bias": []}),
        err(400, &["logit_bias"]),
    );
    c.both("logit_bias {}", json!({"logit_bias": {}}), Expect::Ok);

    // --- Prompts: empty, mixed, out of range, too many, too long. ---
    for (name, prompt) in [
        ("[]", json!([])),
        ("[[]]", json!([[]])),
        ("[[1, 2], []]", json!([[1, 2], []])),
        ("[\"a\", 1]", json!(["a", 1])),
        ("[[1, 2], \"a\"]", json!([[1, 2], "a"])),
        ("[1, [2]]", json!([1, [2]])),
        ("[1024] (out of range)", json!([VOCAB])),
        ("[-1]", json!([-1])),
        ("[2^32]", json!([1u64 << 32])),
        ("[[5], [99999]]", json!([[5], [99_999]])),
        ("5", json!(5)),
        ("null", json!(null)),
        ("{}", json!({})),
        ("missing", delete()),
        ("[1.5]", json!([1.5])),
        ("[[[1]]]", json!([[[1]]])),
    ] {
        c.completions(
            &format!("prompt {name}"),
            json!({ "prompt": prompt }),
            err(400, &["prompt"]),
        );
    }
    c.completions("prompt \"\"", json!({"prompt": ""}), Expect::Either);
    c.completions("prompt [\"\"]", json!({"prompt": [""]}), Expect::Either);
    c.completions(
        "prompt [[1, 2], [3]]",
        json!({"prompt": [[1, 2], [3]]}),
        Expect::Ok,
    );
    c.completions(
        "prompt of special token ids",
        json!({"prompt": [0, 1, 2, 1023]}),
        Expect::Ok,
    );
    c.completions(
        "8 prompts with n 64",
        json!({"prompt": vec!["hi"; 8], "n": 64}),
        err(400, &["n"]),
    );
    c.completions(
        "8 prompts with n 16 (the cap)",
        json!({"prompt": vec!["hi"; 8], "n": 16}),
        Expect::Ok,
    );
    c.completions(
        "1000 prompts",
        json!({"prompt": vec!["hi"; 1000]}),
        err(400, &["n", "prompt"]),
    );
    c.completions(
        "prompt of 3 MB",
        json!({"prompt": "a ".repeat(1_500_000)}),
        err(400, &["prompt"]),
    );
    c.completions(
        "3 prompts of 1 MB",
        json!({"prompt": vec!["b ".repeat(500_000); 3]}),
        err(400, &["prompt"]),
    );
    c.completions(
        "prompt of 600000 token ids",
        json!({"prompt": vec![5; 600_000]}),
        Expect::Error(400, Param::Any),
    );
    c.completions(
        "prompt longer than the context",
        json!({"prompt": vec![5; CONTEXT as usize + 1]}),
        Expect::Error(400, Param::Any),
    );
    c.completions(
        "suffix of 3 MB",
        json!({"suffix": "c".repeat(3_000_000)}),
        Expect::Either,
    );

    // --- Messages. ---
    let msg = |role: &str, content: Value| json!({"role": role, "content": content});
    for (name, messages) in [
        ("[]", json!([])),
        ("missing", delete()),
        ("{}", json!({})),
        ("\"hi\"", json!("hi")),
        ("null", json!(null)),
        ("[5]", json!([5])),
        ("role missing", json!([{"content": "hi"}])),
        ("role 5", json!([{"role": 5, "content": "hi"}])),
        ("content 5", json!([msg("user", json!(5))])),
        ("content {}", json!([msg("user", json!({}))])),
        (
            "5000 messages",
            Value::Array(vec![msg("user", json!("hi")); 5000]),
        ),
        (
            "content of 3 MB",
            json!([msg("user", json!("d ".repeat(1_500_000)))]),
        ),
        (
            "3 messages of 1 MB",
            Value::Array(vec![msg("user", json!("e ".repeat(500_000))); 3]),
        ),
    ] {
        c.chat(
            &format!("messages {name}"),
            json!({ "messages": messages }),
            err(400, &["messages"]),
        );
    }
    for (name, content) in [
        ("lone high surrogate", raw_json(r#""\ud800""#)),
        ("lone low surrogate", raw_json(r#""\udc00""#)),
        ("surrogate in text", raw_json(r#""a\ud800b""#)),
        ("reversed surrogate pair", raw_json(r#""\udc00\ud800""#)),
        ("NUL", json!("a\u{0}b")),
        ("null content", json!(null)),
        ("text parts", json!([{"type": "text", "text": "hi"}])),
        (
            "an image part",
            json!([{"type": "image_url", "image_url": {"url": "x"}}]),
        ),
        (
            "100000 text parts",
            Value::Array(vec![json!({"type": "text", "text": "f"}); 100_000]),
        ),
        ("part of unknown type", json!([{"type": "wizard"}])),
    ] {
        c.chat(
            &format!("content: {name}"),
            json!({ "messages": [msg("user", content)] }),
            Expect::Either,
        );
    }
    // Not in the agreed caps: accepted (rendered by the template) or refused, both are fine.
    c.chat(
        "messages with an unknown role",
        json!({"messages": [msg("wizard", json!("hi"))]}),
        Expect::Either,
    );
    c.chat(
        "content: a valid surrogate pair",
        json!({"messages": [msg("user", raw_json(r#""\ud83d\ude00""#))]}),
        Expect::Ok,
    );
    c.chat(
        "system and assistant messages only",
        json!({"messages": [msg("system", json!("s")), msg("assistant", json!("a"))]}),
        Expect::Either,
    );
    c.chat(
        "continue_final_message after a user message",
        json!({"continue_final_message": true, "add_generation_prompt": false}),
        Expect::Either,
    );
    c.chat(
        "continue_final_message with add_generation_prompt",
        json!({"continue_final_message": true, "add_generation_prompt": true}),
        Expect::Either,
    );
    c.chat(
        "chat_template_kwargs with 10000 keys",
        json!({"chat_template_kwargs": bias(0, 10_000, 1.0)}),
        Expect::Either,
    );
    c.chat(
        "10000 tools",
        json!({"tools": vec![json!({"type": "function", "function": {"name": "f"}}); 10_000]}),
        Expect::Either,
    );
    c.chat(
        "tools of the wrong shape",
        json!({"tools": [5, "x", null, []]}),
        Expect::Either,
    );

    // --- Wrong types everywhere. ---
    for (field, value) in [
        ("model", json!(5)),
        ("max_tokens", json!("x")),
        ("temperature", json!("hot")),
        ("top_p", json!("x")),
        ("n", json!("x")),
        ("stop", json!({})),
        ("seed", json!("x")),
        ("presence_penalty", json!([])),
        ("frequency_penalty", json!({})),
        ("logit_bias", json!("x")),
        ("user", json!(5)),
        ("top_k", json!(1.5)),
        ("min_p", json!("x")),
        ("repetition_penalty", json!("x")),
        ("min_tokens", json!(-1)),
        ("ignore_eos", json!("x")),
        ("stop_token_ids", json!("x")),
        ("priority", json!("x")),
        ("cache_salt", json!(5)),
        ("skip_special_tokens", json!("x")),
    ] {
        c.both(
            &format!("{field} of the wrong type"),
            json!({ field: value }),
            Expect::Error(400, Param::Named(Box::leak(Box::new([field])))),
        );
    }
    for (field, value) in [("stream", json!("yes")), ("stream_options", json!("x"))] {
        c.add(
            &format!("{field} of the wrong type"),
            BOTH,
            NOT_STREAMED,
            json!({ field: value, "stream": if field == "stream" { value.clone() } else { json!(true) } }),
            Expect::Error(400, Param::Named(Box::leak(Box::new([field])))),
        );
    }
    c.add(
        "stream_options.include_usage of the wrong type",
        BOTH,
        NOT_STREAMED,
        json!({"stream": true, "stream_options": {"include_usage": "yes"}}),
        err(400, &["stream_options"]),
    );
    for (field, value) in [
        ("logprobs", json!("x")),
        ("top_logprobs", json!("x")),
        ("add_generation_prompt", json!(5)),
        ("continue_final_message", json!("x")),
        ("chat_template_kwargs", json!([])),
    ] {
        c.chat(
            &format!("{field} of the wrong type"),
            json!({ field: value }),
            Expect::Error(400, Param::Named(Box::leak(Box::new([field])))),
        );
    }
    for (field, value) in [
        ("logprobs", json!("x")),
        ("echo", json!("x")),
        ("suffix", json!(5)),
        ("best_of", json!("x")),
        ("add_special_tokens", json!("x")),
    ] {
        c.completions(
            &format!("{field} of the wrong type"),
            json!({ field: value }),
            Expect::Error(400, Param::Named(Box::leak(Box::new([field])))),
        );
    }
    c.both(
        "an unknown model",
        json!({"model": "nope"}),
        err(404, &["model"]),
    );
    c.both(
        "a model name of 1 MB",
        json!({"model": "m".repeat(1 << 20)}),
        Expect::Error(404, Param::Any),
    );
    c.both("cache_salt \"\"", json!({"cache_salt": ""}), Expect::Either);
    c.both(
        "cache_salt of 1 MB",
        json!({"cache_salt": "s".repeat(1 << 20)}),
        Expect::Either,
    );
    c.both(
        "unknown fields with large values",
        json!({"metadata": bias(0, 10_000, 1.0), "x": "y".repeat(1 << 20)}),
        Expect::Either,
    );

    // --- Bodies that are not a request: invalid JSON, invalid UTF-8, deep nesting, too big. ---
    let not_json = Expect::Error(400, Param::Any);
    for (name, body) in [
        ("an empty body", b"".to_vec()),
        ("not JSON", b"hello".to_vec()),
        ("a JSON array", b"[]".to_vec()),
        ("JSON null", b"null".to_vec()),
        ("a JSON string", b"\"str\"".to_vec()),
        (
            "truncated JSON",
            br#"{"messages": [{"role": "user", "con"#.to_vec(),
        ),
        (
            "trailing garbage",
            br#"{"prompt": "a", "max_tokens": 2} xyz"#.to_vec(),
        ),
        ("NUL bytes", vec![0; 64]),
        (
            "invalid UTF-8 in a key",
            b"{\"pro\xffmpt\": \"a\"}".to_vec(),
        ),
    ] {
        c.bytes(name, body, not_json.clone());
    }
    c.bytes(
        "an empty object",
        b"{}".to_vec(),
        err(400, &["messages", "prompt"]),
    );
    c.bytes(
        "a UTF-8 byte order mark",
        [
            &b"\xef\xbb\xbf"[..],
            br#"{"prompt": "a", "messages": [{"role": "user", "content": "a"}], "max_tokens": 2}"#,
        ]
        .concat(),
        Expect::Either,
    );
    c.bytes(
        "duplicated keys",
        br#"{"prompt": "a", "messages": [{"role": "user", "content": "a"}], "max_tokens": 2, "max_tokens": 3}"#.to_vec(),
        Expect::Either,
    );
    for api in BOTH {
        let field = if *api == Api::Chat {
            "messages"
        } else {
            "prompt"
        };
        let mut cases = Cases::default();
        let invalid_utf8 = match api {
            Api::Chat => b"{\"messages\": [{\"role\": \"user\", \"content\": \"a\xff\xfe\xc3b\"}], \"max_tokens\": 2}".to_vec(),
            Api::Completions => b"{\"prompt\": \"a\xff\xfe\xc3b\", \"max_tokens\": 2}".to_vec(),
        };
        let nest = |depth: usize| {
            format!(
                r#"{{"{field}": {}, "max_tokens": 2}}"#,
                nested_arrays(depth)
            )
            .into_bytes()
        };
        let unknown_nest = |depth: usize| {
            let mut body = String::from_utf8(render(&base(*api))).unwrap();
            body.pop();
            format!(r#"{body}, "metadata": {}}}"#, nested_arrays(depth)).into_bytes()
        };
        let object_nest = |depth: usize| {
            let mut body = String::from_utf8(render(&base(*api))).unwrap();
            body.pop();
            format!(
                r#"{body}, "metadata": {}1{}}}"#,
                r#"{"a": "#.repeat(depth),
                "}".repeat(depth)
            )
            .into_bytes()
        };
        let null = Expect::Error(400, Param::Null);
        for (name, body, expect) in [
            (
                "invalid UTF-8 in the text",
                invalid_utf8,
                Expect::Error(400, Param::Any),
            ),
            (
                "arrays nested 100000 deep in the input",
                nest(100_000),
                null.clone(),
            ),
            (
                "arrays nested 100000 deep in an unknown field",
                unknown_nest(100_000),
                null.clone(),
            ),
            (
                "objects nested 100000 deep",
                object_nest(100_000),
                null.clone(),
            ),
            (
                "arrays nested 100 deep in an unknown field",
                unknown_nest(100),
                null.clone(),
            ),
            (
                "arrays nested 65 deep in an unknown field",
                unknown_nest(65),
                null.clone(),
            ),
            (
                "arrays nested 30 deep in an unknown field",
                unknown_nest(30),
                Expect::Either,
            ),
        ] {
            cases.0.push(Case {
                name: name.to_string(),
                api: *api,
                stream: false,
                body,
                raw_request: None,
                read_timeout: None,
                expect,
                check: None,
            });
        }
        c.0.append(&mut cases.0);
    }
    // 9 MiB: over the 8 MiB default body limit.
    let padding = "p".repeat(9 << 20);
    c.add(
        "a 9 MiB body",
        BOTH,
        NOT_STREAMED,
        json!({ "metadata": padding }),
        err(413, &[]),
    );

    // --- Below the API: malformed HTTP. ---
    let t = Duration::from_secs(15);
    c.raw(
        "a garbage request line",
        b"HELLO\r\n\r\n".to_vec(),
        t,
        Expect::NotServerError,
    );
    c.raw(
        "a 1 MB header",
        format!(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nContent-Length: 2\r\n\r\n{{}}",
            "h".repeat(1 << 20)
        )
        .into_bytes(),
        t,
        Expect::NotServerError,
    );
    c.raw(
        "a Content-Length that is not a number",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}".to_vec(),
        t,
        Expect::NotServerError,
    );
    c.raw(
        "a declared 100 MB body that never comes",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n".to_vec(),
        t,
        err(413, &[]),
    );
    c.raw(
        "a chunked 9 MiB body",
        {
            let mut r = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
            let chunk = vec![b' '; 1 << 20];
            for _ in 0..9 {
                r.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                r.extend_from_slice(&chunk);
                r.extend_from_slice(b"\r\n");
            }
            r.extend_from_slice(b"0\r\n\r\n");
            r
        },
        t,
        err(413, &[]),
    );
    // --- Output constraints and tools (issue 14): bounded compile and per-token work. ---
    c.both(
        "a regex whose DFA is exponential",
        json!({"guided_regex": "(a|b)*a(a|b){60}"}),
        Expect::Ok,
    );
    c.both(
        "a regex with nested quantifiers",
        json!({"structured_outputs": {"regex": "((x+)+)+y"}}),
        Expect::Ok,
    );
    c.both(
        "a regex repeating 100000 times",
        json!({"guided_regex": "[0-9]{100000}"}),
        Expect::Either,
    );
    c.both(
        "a self-referencing schema",
        json!({"guided_json": {"type": "object", "properties": {"a": {"$ref": "#"}}}}),
        Expect::Either,
    );
    c.both(
        "a schema with a dangling $ref",
        json!({"guided_json": {"$ref": "#/$defs/missing"}}),
        err(400, &["guided_json"]),
    );
    c.both(
        "a left-recursive grammar",
        json!({"guided_grammar": "start: a\na: a \"x\" | \"x\""}),
        Expect::Either,
    );
    c.both(
        "a grammar that never ends",
        json!({"structured_outputs": {"grammar": "start: \"x\" start"}}),
        Expect::Refusable,
    );
    c.both(
        "ten thousand choices",
        json!({"guided_choice": (0..10_000).map(|i| format!("choice-{i}")).collect::<Vec<_>>()}),
        Expect::Either,
    );
    c.both(
        "a schema that is a number",
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}}}),
        err(400, &["response_format.json_schema.schema"]),
    );
    c.chat(
        "129 tools",
        json!({"tools": (0..129).map(|i| json!({"type": "function", "function": {"name": format!("f{i}")}})).collect::<Vec<_>>()}),
        err(400, &["tools"]),
    );
    c.chat(
        "a forced call to a function with a hostile schema",
        json!({
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}}, "required": ["s"]}}}],
            "tool_choice": "required",
        }),
        Expect::Ok,
    );

    c.raw(
        "a bad chunk size",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n".to_vec(),
        t,
        Expect::NotServerError,
    );
    c.raw(
        "Content-Length and Transfer-Encoding together",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
        t,
        Expect::NotServerError,
    );
    c.raw(
        "GET on a POST route",
        b"GET /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
        t,
        Expect::NotServerError,
    );
    c.raw(
        "an unknown route",
        b"POST /v1/nope HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
            .to_vec(),
        t,
        err(404, &[]),
    );
    c.raw(
        "text/plain content type",
        {
            let body = r#"{"prompt": "a", "max_tokens": 2}"#;
            format!(
                "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        },
        t,
        Expect::Either,
    );
    c
}

/// Sends the case and judges the answer; Err describes what was wrong.
fn run_case(server: &Server, case: &Case) -> Result<(), String> {
    let started = Instant::now();
    let response = match &case.raw_request {
        Some(request) => common::raw_with_timeout(server.port, request, case.read_timeout.unwrap()),
        None => server.post(case.api.path(), &case.body),
    };
    let took = started.elapsed();
    if took > Duration::from_secs(2) {
        println!("  note: {} took {took:?}", label(case));
    }
    judge(case, &response)
}

fn label(case: &Case) -> String {
    match &case.raw_request {
        Some(_) => format!("[raw http] {}", case.name),
        None => format!(
            "[{}{}] {}",
            case.api.path(),
            if case.stream { " stream" } else { "" },
            case.name
        ),
    }
}

fn judge(case: &Case, response: &Response) -> Result<(), String> {
    let status = response.status;
    let context = || {
        format!(
            "status {status}{}: {}",
            response
                .error
                .as_ref()
                .map_or(String::new(), |e| format!(" ({e})")),
            response.excerpt()
        )
    };
    if status >= 500 {
        return Err(format!("a server error: {}", context()));
    }
    match &case.expect {
        Expect::NotServerError => {
            if status == 0 || (400..500).contains(&status) {
                return Ok(());
            }
            Err(format!(
                "expected a 4xx or a closed connection, got {}",
                context()
            ))
        }
        Expect::Ok => {
            if status != 200 {
                return Err(format!("expected 200, got {}", context()));
            }
            let success = check_success(response, case.stream)?;
            case.check.map_or(Ok(()), |check| check(&success))
        }
        Expect::Refusable if status == 200 && case.stream => {
            match check_success(response, case.stream) {
                Ok(_) => Ok(()),
                Err(e) if e.contains("\"type\":\"invalid_request_error\"") => Ok(()),
                Err(e) => Err(e),
            }
        }
        Expect::Either | Expect::Refusable => match status {
            200 => {
                let success = check_success(response, case.stream)?;
                case.check.map_or(Ok(()), |check| check(&success))
            }
            400..=499 => check_error_shape(response).map(|_| ()),
            _ => Err(format!("expected a 4xx or a success, got {}", context())),
        },
        Expect::Error(want, param) => {
            if status != *want {
                return Err(format!("expected {want}, got {}", context()));
            }
            let error = check_error_shape(response)?;
            let got = error["param"].as_str();
            let fine = match param {
                Param::Any => true,
                Param::Null => got.is_none(),
                Param::Named([]) => true,
                Param::Named(names) => got.is_some_and(|p| {
                    names.iter().any(|n| {
                        p == *n
                            || p.strip_prefix(n)
                                .is_some_and(|rest| rest.starts_with(['[', '.']))
                    })
                }),
            };
            if !fine {
                return Err(format!(
                    "expected param {param:?}, got {:?}: {}",
                    error["param"],
                    context()
                ));
            }
            if *want == 413 && error["code"] != "request_too_large" {
                return Err(format!(
                    "a 413 without code request_too_large: {}",
                    context()
                ));
            }
            Ok(())
        }
    }
}

/// Liveness and no held blocks after a case; restarts a broken server so the cases after it
/// still say something (the failure is recorded).
fn after_case(server: &mut Server, logs: &mut String, worst: &mut Duration) -> Result<(), String> {
    let mut problems = Vec::new();
    if let Some(status) = server.exited() {
        problems.push(format!("the server exited ({status})"));
    } else {
        match server.liveness(LIVENESS) {
            Ok(took) => *worst = (*worst).max(took),
            Err(e) => problems.push(e),
        }
        if let Err(e) = server.wait_blocks_free(Duration::from_secs(5)) {
            problems.push(e);
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    logs.push_str(&server.log());
    *server = start();
    Err(format!(
        "afterwards: {} (server restarted)",
        problems.join("; ")
    ))
}

fn start() -> Server {
    Server::start(&[
        "--max-model-len",
        &CONTEXT.to_string(),
        "--max-logit-bias",
        &MAX_LOGIT_BIAS.to_string(),
    ])
}

#[test]
fn hostile_requests_never_hurt_the_server() {
    let mut server = start();
    let mut logs = String::new();
    let mut failures: Vec<String> = Vec::new();
    let mut worst = Duration::ZERO;
    let cases = hostile_cases();
    let started = Instant::now();
    let mut fail = |what: String, problem: String| {
        let line = format!("{what}: {problem}");
        println!("FAIL {line}");
        failures.push(line);
    };
    for case in &cases.0 {
        let verdict = run_case(&server, case);
        let after = after_case(&mut server, &mut logs, &mut worst);
        for problem in [verdict.err(), after.err()].into_iter().flatten() {
            fail(label(case), problem);
        }
    }

    // A request in flight when the once-fatal request arrives still completes normally.
    let port = server.port;
    let long = std::thread::spawn(move || {
        let body = json!({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 200,
                          "ignore_eos": true, "stream": true});
        common::request(port, "POST", "/v1/completions", &render(&body))
    });
    std::thread::sleep(Duration::from_millis(50));
    let fatal = json!({"model": MODEL, "prompt": "x", "max_tokens": 8, "temperature": 1e-39,
                       "top_k": 5, "logit_bias": bias(0, VOCAB, -100.0)});
    let fatal = server.post("/v1/completions", &render(&fatal));
    let long = long.join().unwrap();
    let in_flight = Case {
        name: "a stream in flight next to the all-masked request".into(),
        api: Api::Completions,
        stream: true,
        body: Vec::new(),
        raw_request: None,
        read_timeout: None,
        expect: Expect::Ok,
        check: Some(|s| match s.finish_reasons.first() {
            Some((_, reason)) if reason == "length" => Ok(()),
            other => Err(format!("finished with {other:?}, not length")),
        }),
    };
    let masked = Case {
        stream: false,
        check: None,
        ..in_flight.clone()
    };
    for (what, response, case) in [
        ("the in-flight stream", &long, &in_flight),
        ("the all-masked request", &fatal, &masked),
    ] {
        if let Err(e) = judge(case, response) {
            fail(format!("{}: {what}", case.name), e);
        }
    }
    if let Err(e) = after_case(&mut server, &mut logs, &mut worst) {
        fail(in_flight.name.clone(), e);
    }

    // A client that hangs up mid-stream, and one that never reads: neither holds up others,
    // and their blocks come back.
    let post_head = |body: &[u8]| {
        format!(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
    };
    let body = render(
        &json!({"model": MODEL, "prompt": "x", "max_tokens": 200, "n": 8,
                              "ignore_eos": true, "stream": true}),
    );
    let mut hangs_up = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    hangs_up.write_all(post_head(&body).as_bytes()).unwrap();
    hangs_up.write_all(&body).unwrap();
    let mut first = [0u8; 256];
    let _ = hangs_up.read(&mut first);
    drop(hangs_up);
    let body = render(
        &json!({"model": MODEL, "prompt": "x", "max_tokens": 250, "n": 16,
                              "ignore_eos": true, "stream": true, "logprobs": 20}),
    );
    let mut never_reads = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    never_reads.write_all(post_head(&body).as_bytes()).unwrap();
    never_reads.write_all(&body).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    if let Err(e) = server.liveness(LIVENESS) {
        fail("while a client does not read its stream".into(), e);
    }
    drop(never_reads);
    if let Err(e) = after_case(&mut server, &mut logs, &mut worst) {
        fail("clients that hang up or never read".into(), e);
    }

    logs.push_str(&server.log());
    drop(server);
    let panics: Vec<&str> = logs.lines().filter(|l| l.contains("panicked")).collect();
    println!(
        "{} hostile requests in {:?}; slowest liveness request {worst:?}; {} failures",
        cases.0.len(),
        started.elapsed(),
        failures.len()
    );
    assert!(
        panics.is_empty(),
        "the server panicked:\n{}\n\nand {} failures:\n{}",
        panics.join("\n"),
        failures.len(),
        failures.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Reads until the server closes `conn`; Err if it is still open after `patience`.
fn closed_within(conn: &mut TcpStream, patience: Duration) -> Result<String, String> {
    conn.set_read_timeout(Some(patience)).unwrap();
    let mut answer = Vec::new();
    match conn.read_to_end(&mut answer) {
        Ok(_) => Ok(String::from_utf8_lossy(&answer).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(String::new()),
        Err(e) => Err(format!("still open after {patience:?} ({e})")),
    }
}

/// Connections that send half a request line, nothing, headers one byte at a time, or half
/// a body are closed after `--header-timeout` / `--body-timeout`, and other requests are
/// served meanwhile.
#[test]
fn slow_clients_are_cut_off() {
    let server = Server::start(&["--header-timeout", "1s", "--body-timeout", "1s"]);
    let connect = || TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut half_line = connect();
    half_line.write_all(b"POST /v1/compl").unwrap();
    let mut idle = connect();
    let mut half_body = connect();
    half_body
        .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
        .unwrap();
    // Slowloris: a header byte every 100 ms keeps the connection busy but never finishes.
    let mut trickle = connect();
    let mut trickle_writer = trickle.try_clone().unwrap();
    std::thread::spawn(move || {
        let head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter();
        for &byte in head.chain(std::iter::repeat(&b'a')).take(600) {
            if trickle_writer.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let started = Instant::now();
    for _ in 0..3 {
        server
            .liveness(LIVENESS)
            .expect("served while clients are slow");
    }
    // Ten times the timeouts: long enough not to be flaky, short enough to tell "closed" from
    // "never closed" (issue 11 saw such a connection still open after 45 s).
    let patience = Duration::from_secs(10);
    for (what, conn) in [
        ("half a request line", &mut half_line),
        ("nothing", &mut idle),
        ("a header byte every 100 ms", &mut trickle),
        ("half its body", &mut half_body),
    ] {
        let answer = closed_within(conn, patience)
            .unwrap_or_else(|e| panic!("a connection that sent {what}: {e}; the timeouts are 1s"));
        let status = answer.split(' ').nth(1).unwrap_or("");
        assert!(
            answer.is_empty() || status == "408" || status == "400",
            "a connection that sent {what} got {}",
            excerpt(&answer, 300)
        );
        println!(
            "a connection that sent {what} was closed by {:?} ({})",
            started.elapsed(),
            if answer.is_empty() {
                "no answer"
            } else {
                status
            }
        );
    }
    server
        .liveness(LIVENESS)
        .expect("served after the slow clients");
    let panics = server.panic_lines();
    assert!(panics.is_empty(), "{}", panics.join("\n"));
}
