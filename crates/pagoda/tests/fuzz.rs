//! A seeded fuzz run against the real `pagoda serve` binary (issue 11): at least 10,000 valid
//! requests, each mutated at random (fields dropped, duplicated, retyped, swapped for extreme
//! values, nested, bytes truncated or flipped), sent by several clients at once. No answer may
//! be a 5xx or a broken success, the log must show no panic, and at the end no KV block is held
//! and the engine is alive.
//!
//! `PAGODA_FUZZ_SEED` and `PAGODA_FUZZ_REQUESTS` override the seed and the count, to replay or
//! to search longer.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{check_error_shape, check_success, raw_json, render, Response, Server, MODEL};
use serde_json::{json, Value};

const DEFAULT_SEED: u64 = 0x9e37_79b9_7f4a_7c15;
const DEFAULT_REQUESTS: usize = 10_000;
const CLIENTS: usize = 4;
/// A small context bounds the work of a mutation that asks for the most tokens.
const CONTEXT: &str = "64";
/// The most bytes one mutation adds by repeating something: enough to cross every cap but the
/// body's and the prompt's (the hostile suite sends those), small enough to keep the run fast.
const MAX_GROWTH: usize = 256 << 10;

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Valid requests the mutations start from: every endpoint that takes client input and most of
/// their fields, with few tokens so a success is quick.
fn seeds() -> Vec<(&'static str, Value)> {
    let chat = "/v1/chat/completions";
    let completions = "/v1/completions";
    vec![
        (
            chat,
            json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}),
        ),
        (
            chat,
            json!({"model": MODEL, "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Say something"}],
                   "max_tokens": 3, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "seed": 7,
                   "stop": ["\n", "."], "n": 2, "logprobs": true, "top_logprobs": 2,
                   "presence_penalty": 0.5, "frequency_penalty": 0.1, "logit_bias": {"5": 2.0, "9": -1}}),
        ),
        (
            chat,
            json!({"model": MODEL, "messages": [{"role": "user", "content": "Stream it"}],
                   "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true},
                   "stop_token_ids": [2], "min_p": 0.05, "repetition_penalty": 1.1}),
        ),
        (
            chat,
            json!({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "Go on"}]},
                   {"role": "assistant", "content": "Once"}],
                   "continue_final_message": true, "add_generation_prompt": false,
                   "max_completion_tokens": 2, "priority": 1, "cache_salt": "s1",
                   "skip_special_tokens": false, "user": "u1", "chat_template_kwargs": {"k": 1}}),
        ),
        (
            completions,
            json!({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0}),
        ),
        (
            completions,
            json!({"model": MODEL, "prompt": [1, 5, 9, 300], "max_tokens": 3, "logprobs": 2, "echo": true}),
        ),
        (
            completions,
            json!({"model": MODEL, "prompt": ["a", "b c"], "n": 2, "max_tokens": 2, "stream": true,
                   "stream_options": {"include_usage": true}, "seed": 3, "stop": "x"}),
        ),
        (
            completions,
            json!({"model": MODEL, "prompt": [[5, 6], [7]], "stop_token_ids": [2, 3], "min_tokens": 1,
                   "ignore_eos": true, "max_tokens": 2, "logit_bias": {"7": -100}, "best_of": 1,
                   "suffix": "end", "add_special_tokens": true}),
        ),
        (
            "/tokenize",
            json!({"model": MODEL, "prompt": "hello world"}),
        ),
        (
            "/tokenize",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}),
        ),
        ("/detokenize", json!({"model": MODEL, "tokens": [1, 5, 9]})),
    ]
}

const FIELDS: &[&str] = &[
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "n",
    "stop",
    "stop_token_ids",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "echo",
    "suffix",
    "best_of",
    "stream",
    "stream_options",
    "include_usage",
    "min_tokens",
    "ignore_eos",
    "priority",
    "cache_salt",
    "skip_special_tokens",
    "user",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template_kwargs",
    "tools",
    "add_special_tokens",
    "tokens",
    "role",
    "content",
    "type",
    "text",
    "return_token_strs",
];

/// A value chosen to hurt: extremes of every JSON type and the edges of every cap.
fn extreme(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => json!(*rng.pick(&[
            0i64,
            1,
            -1,
            2,
            16,
            17,
            20,
            21,
            64,
            128,
            129,
            256,
            257,
            300,
            301,
            1023,
            1024,
            4096,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ])),
        1 => json!(*rng.pick(&[u64::MAX, 1 << 63, 1 << 32, u32::MAX as u64])),
        2 => raw_json(rng.pick::<&str>(&[
            "18446744073709551616",
            "1e309",
            "-1e309",
            "-0.0",
            "1e-45",
            "1e-39",
            "5e-324",
            "1e39",
            "-1e39",
            "99999999999999999999999999999999999999",
            "0.0000000000000000000000000000000000001",
            r#""\ud800""#,
            r#""\udfff\ud800""#,
            r#""\u0000""#,
        ])),
        3 => json!(*rng.pick(&[0.5, 1.5, -0.5, 2.0, 1e38, -1e38, 3.4e38, 1e-30, 100.0, -100.0])),
        4 => {
            let len = *rng.pick(&[0usize, 1, 255, 256, 257, 4096, 70_000]);
            let unit = *rng.pick(&["a", "é", "☃", "😀", "<|im_end|>", " ", "\n", "\\"]);
            json!(unit.repeat(len.div_ceil(unit.len().max(1)).max(usize::from(len > 0))))
        }
        5 => json!(*rng.pick(&[
            "",
            "user",
            "system",
            "assistant",
            "tool",
            "wizard",
            "text",
            MODEL,
            "[DONE]"
        ])),
        6 => rng
            .pick(&[
                json!(null),
                json!(true),
                json!(false),
                json!([]),
                json!({}),
                json!([[]]),
                json!([""]),
            ])
            .clone(),
        7 => {
            // A list of some length, of one kind of item.
            let len = *rng.pick(&[1usize, 2, 16, 17, 256, 257, 301, 2000]);
            let item = match rng.below(4) {
                0 => json!(rng.below(1100)),
                1 => json!("s"),
                2 => json!({"role": "user", "content": "m"}),
                _ => json!([rng.below(1100)]),
            };
            Value::Array(vec![item; len])
        }
        _ => {
            // A map like logit_bias: token-id-like keys (some out of range) to numbers.
            let len = *rng.pick(&[1usize, 5, 300, 301, 1024, 2000]);
            let value = *rng.pick(&[-100.0, 100.0, 0.0, 1e38, -1e38]);
            let offset = *rng.pick(&[0usize, 1000, 1 << 31]);
            Value::Object(
                (0..len)
                    .map(|i| ((i + offset).to_string(), json!(value)))
                    .collect(),
            )
        }
    }
}

/// A step of a path into a JSON value.
#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                prefix.push(Step::Key(k.clone()));
                paths(v, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            // Long lists: a few of their items are enough.
            for (i, v) in items.iter().enumerate().take(8) {
                prefix.push(Step::Index(i));
                paths(v, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn node<'a>(value: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(value, |v, step| match step {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

/// One structural mutation of `body`.
fn mutate(rng: &mut Rng, body: &mut Value) {
    let mut all = Vec::new();
    paths(body, &mut Vec::new(), &mut all);
    let path = rng.pick(&all).clone();
    match rng.below(8) {
        // Drop the node.
        0 if !path.is_empty() => {
            let (last, parent) = path.split_last().unwrap();
            match (node(body, parent), last) {
                (Value::Object(map), Step::Key(k)) => {
                    map.remove(k);
                }
                (Value::Array(items), Step::Index(i)) => {
                    items.remove(*i);
                }
                _ => {}
            }
        }
        // Duplicate: an item repeated, or a value copied under another field's name.
        1 => {
            let target = node(body, &path);
            match target {
                Value::Array(items) if !items.is_empty() => {
                    let item = items[rng.below(items.len())].clone();
                    let size = item.to_string().len().max(1);
                    let times = (*rng.pick(&[1usize, 2, 16, 300, 5000])).min(MAX_GROWTH / size);
                    items.extend(std::iter::repeat_n(item, times));
                }
                Value::Object(map) if !map.is_empty() => {
                    let value = map.values().nth(rng.below(map.len())).unwrap().clone();
                    map.insert(rng.pick(FIELDS).to_string(), value);
                }
                Value::String(s) => {
                    let times =
                        (*rng.pick(&[2usize, 100, 20_000])).min(MAX_GROWTH / s.len().max(1));
                    *s = s.repeat(times.max(1));
                }
                _ => {}
            }
        }
        // Retype / swap for an extreme value.
        2..=4 => *node(body, &path) = extreme(rng),
        // Add a field with an extreme value (at the root most of the time).
        5 => {
            let at = if rng.percent(70) { Vec::new() } else { path };
            if let Value::Object(map) = node(body, &at) {
                map.insert(rng.pick(FIELDS).to_string(), extreme(rng));
            }
        }
        // Nest: wrap the node in arrays or objects, shallow or very deep.
        6 => {
            let target = node(body, &path);
            let depth = *rng.pick(&[1usize, 2, 63, 64, 65, 129, 1000]);
            let mut value = target.take();
            let as_array = rng.percent(50);
            for _ in 0..depth {
                value = if as_array {
                    Value::Array(vec![value])
                } else {
                    json!({ "a": value })
                };
            }
            *target = value;
        }
        // A number nudged: off by one, negated, or made a float.
        _ => {
            let target = node(body, &path);
            if let Some(n) = target.as_i64() {
                *target = match rng.below(4) {
                    0 => json!(n.wrapping_add(1)),
                    1 => json!(n.wrapping_sub(1)),
                    2 => json!(n.wrapping_neg()),
                    _ => json!(n as f64 + 0.5),
                };
            } else if let Some(x) = target.as_f64() {
                *target = json!(-x);
            } else {
                *target = extreme(rng);
            }
        }
    }
}

/// Byte-level damage to a rendered body.
fn damage(rng: &mut Rng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(6) {
        0 => bytes.truncate(at),
        1 => bytes[at] ^= 1 << rng.below(8),
        2 => bytes[at] = *rng.pick(&[0x00, 0xff, 0xc3, 0x80, b'"', b'\\', b'{', b']', b',']),
        3 => {
            let end = (at + 1 + rng.below(16)).min(bytes.len());
            bytes.drain(at..end);
        }
        4 => {
            let end = (at + 1 + rng.below(64)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            bytes.splice(at..at, copy);
        }
        _ => {
            const INSERTS: &[&[u8]] = &[
                b"[[[[[[[[",
                b"\xed\xa0\x80",
                b"\\u",
                b"1e999",
                b"}",
                b"\xf0\x9f",
            ];
            let insert = *rng.pick(INSERTS);
            bytes.splice(at..at, insert.iter().copied());
        }
    }
}

/// Valid values at the edges, field by field: requests the engine must serve (or refuse
/// cleanly) rather than the parser.
fn tweak(rng: &mut Rng, body: &mut Value) {
    let (field, value) = match rng.below(22) {
        0 | 1 => (
            "temperature",
            rng.pick(&[
                json!(0),
                raw_json("1e-39"),
                raw_json("1e-45"),
                raw_json("-0.0"),
                json!(0.01),
                json!(2),
                json!(100),
            ])
            .clone(),
        ),
        2 => (
            "top_p",
            rng.pick(&[raw_json("1e-45"), json!(0.01), json!(1)])
                .clone(),
        ),
        3 => ("top_k", json!(*rng.pick(&[-1i64, 0, 1, 5, 1024, 1 << 40]))),
        4 => ("min_p", json!(*rng.pick(&[0.0, 0.5, 1.0]))),
        5 | 6 => {
            let bias = match rng.below(5) {
                // The whole vocabulary masked: the request that once stopped the engine.
                4 => (0..1024).map(|i| (i.to_string(), json!(-100))).collect(),
                0 => (0..300).map(|i| (i.to_string(), json!(-100))).collect(),
                1 => (724..1024).map(|i| (i.to_string(), json!(100))).collect(),
                2 => [("2".to_string(), json!(100))].into_iter().collect(),
                _ => [("2".to_string(), json!(-100))].into_iter().collect(),
            };
            ("logit_bias", Value::Object(bias))
        }
        7 => (
            "seed",
            rng.pick(&[json!(-1), json!(0), json!(u64::MAX), json!(i64::MIN)])
                .clone(),
        ),
        8 => ("n", json!(*rng.pick(&[1, 2, 4, 16]))),
        9 | 10 => (
            "max_tokens",
            json!(*rng.pick(&[1u64, 2, u64::MAX, 1 << 63])),
        ),
        11 => ("min_tokens", json!(*rng.pick(&[0u64, 2, u64::MAX]))),
        12 => (
            "stop",
            rng.pick(&[
                json!([]),
                json!(""),
                json!(["e"]),
                json!((0..16).map(|i| format!("s{i}")).collect::<Vec<_>>()),
                json!(["\n", " ", "e", "<|im_end|>"]),
            ])
            .clone(),
        ),
        13 => (
            "stop_token_ids",
            rng.pick(&[json!([]), json!([2]), json!((0..256).collect::<Vec<_>>())])
                .clone(),
        ),
        14 => ("presence_penalty", json!(*rng.pick(&[-2.0, 2.0, 3.4e38]))),
        15 => ("frequency_penalty", json!(*rng.pick(&[-2.0, 2.0, -3.4e38]))),
        16 => ("repetition_penalty", json!(*rng.pick(&[0.01, 1.0, 3.4e38]))),
        17 => ("ignore_eos", json!(true)),
        18 => ("stream", json!(rng.percent(50))),
        19 => ("stream_options", json!({"include_usage": true})),
        20 => ("priority", json!(*rng.pick(&[-1000, 1000]))),
        _ => ("cache_salt", json!(*rng.pick(&["", "x"]))),
    };
    body[field] = value;
}

/// One fuzzed request: where it goes and its body.
fn fuzzed(rng: &mut Rng, seeds: &[(&'static str, Value)]) -> (&'static str, Vec<u8>) {
    let (path, seed) = rng.pick(seeds);
    let mut body = seed.clone();
    if rng.percent(30) {
        for _ in 0..1 + rng.below(4) {
            tweak(rng, &mut body);
        }
        return (path, render(&body));
    }
    for _ in 0..1 + rng.below(3) {
        mutate(rng, &mut body);
    }
    let mut bytes = render(&body);
    if rng.percent(20) {
        for _ in 0..1 + rng.below(2) {
            damage(rng, &mut bytes);
        }
    }
    (path, bytes)
}

/// What is wrong with this answer, if anything.
fn verdict(path: &str, response: &Response) -> Option<String> {
    let status = response.status;
    if status == 0 {
        return Some(format!("no answer ({:?})", response.error));
    }
    if status >= 500 {
        return Some(format!("status {status}"));
    }
    if (400..500).contains(&status) {
        return check_error_shape(response).err();
    }
    if status != 200 {
        return Some(format!("unexpected status {status}"));
    }
    if path.starts_with("/v1/") {
        return check_success(response, response.is_sse()).err();
    }
    if response.json().is_none() {
        return Some("a 200 that is not JSON".into());
    }
    None
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

#[test]
fn ten_thousand_mutated_requests_break_nothing() {
    let seed: u64 = std::env::var("PAGODA_FUZZ_SEED")
        .ok()
        .and_then(|v| {
            let v = v.trim();
            v.strip_prefix("0x")
                .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .unwrap_or(DEFAULT_SEED);
    let total: usize = env_or("PAGODA_FUZZ_REQUESTS", DEFAULT_REQUESTS);
    println!(
        "fuzz seed {seed:#x}, {total} requests, {CLIENTS} clients (PAGODA_FUZZ_SEED to replay)"
    );
    // Every token id may carry a bias, so a fully masked vocabulary reaches the sampler.
    let server = Arc::new(Server::start(&[
        "--max-model-len",
        CONTEXT,
        "--max-logit-bias",
        "1024",
    ]));
    let seeds = Arc::new(seeds());
    let histogram = Arc::new(Mutex::new(BTreeMap::<u16, usize>::new()));
    let problems = Arc::new(Mutex::new(Vec::<String>::new()));
    let problem_count = Arc::new(AtomicUsize::new(0));
    let slowest = Arc::new(Mutex::new(Vec::<(Duration, usize, &str, usize, u16)>::new()));
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (server, seeds, histogram, problems, problem_count, slowest) = (
                server.clone(),
                seeds.clone(),
                histogram.clone(),
                problems.clone(),
                problem_count.clone(),
                slowest.clone(),
            );
            // Deeply nested bodies recurse when built, rendered and dropped: a large stack.
            std::thread::Builder::new()
                .stack_size(256 << 20)
                .spawn(move || {
                    // Each client's stream of requests depends only on the seed and its number.
                    let mut rng =
                        Rng::new(seed ^ (client as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
                    for i in (client..total).step_by(CLIENTS) {
                        let (path, body) = fuzzed(&mut rng, &seeds);
                        let sent = Instant::now();
                        let response = server.post(path, &body);
                        let took = sent.elapsed();
                        {
                            let mut slowest = slowest.lock().unwrap();
                            slowest.push((took, i, path, body.len(), response.status));
                            slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
                            slowest.truncate(5);
                        }
                        *histogram
                            .lock()
                            .unwrap()
                            .entry(response.status)
                            .or_default() += 1;
                        if let Some(problem) = verdict(path, &response) {
                            problem_count.fetch_add(1, Ordering::SeqCst);
                            let mut problems = problems.lock().unwrap();
                            if problems.len() < 20 {
                                problems.push(format!(
                                    "request {i} to {path}: {problem}\n  body: {}\n  answer: {}",
                                    common::excerpt(&String::from_utf8_lossy(&body), 400),
                                    response.excerpt()
                                ));
                            }
                        }
                    }
                })
                .unwrap()
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let took = started.elapsed();
    let histogram = histogram.lock().unwrap().clone();
    println!("{total} requests in {took:?}; status histogram: {histogram:?}");
    for (took, i, path, size, status) in slowest.lock().unwrap().iter() {
        println!("  slow: request {i} to {path} ({size} bytes) took {took:?}, status {status}");
    }

    let mut failures = Vec::new();
    let count = problem_count.load(Ordering::SeqCst);
    if count > 0 {
        failures.push(format!(
            "{count} bad answers; the first ones:\n{}",
            problems.lock().unwrap().join("\n")
        ));
    }
    if let Err(e) = server.wait_blocks_free(Duration::from_secs(10)) {
        failures.push(format!("blocks leaked: {e}"));
    }
    if let Err(e) = server.liveness(Duration::from_secs(5)) {
        failures.push(format!("not alive at the end: {e}"));
    }
    let panics = server.panic_lines();
    if !panics.is_empty() {
        failures.push(format!("the server panicked:\n{}", panics.join("\n")));
    }
    assert!(
        histogram.values().sum::<usize>() == total,
        "every request was answered or counted"
    );
    assert!(
        failures.is_empty(),
        "seed {seed:#x}: {}",
        failures.join("\n\n")
    );
}
