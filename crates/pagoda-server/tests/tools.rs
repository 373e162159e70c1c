//! Tool calling and reasoning output over HTTP. The parrot fixture (it replies with its system
//! message, a newline, then the last user message) writes exactly the calls and thinking a
//! test puts in its prompt; the random tiny model shows that forced tool choices are
//! constrained whatever the model would write.

mod common;

use common::gateway::GatewayServer;
use common::{engine_config, TestServer};
use futures_util::StreamExt;
use pagoda_server::{start_guard, ChatFeatures, GuardSettings, HttpLimits, ToolParser};
use pagoda_text::reasoning::ReasoningFormat;
use pagoda_text::tool_calls::ToolCallFormat;
use serde_json::{json, Value};

const PARROT: &str = "tiny-parrot";

fn hermes() -> ChatFeatures {
    ChatFeatures {
        tool_parser: ToolParser::Format(ToolCallFormat::Hermes),
        reasoning: None,
    }
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "fetch_url",
         "parameters": {"type": "object", "properties": {"url": {"type": "string", "maxLength": 40}}, "required": ["url"], "additionalProperties": false}}}
    ])
}

/// A chat the parrot answers with `system` + "\n" + `user`.
fn parrot_chat(system: &str, user: &str) -> Value {
    json!({
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "tools": tools(),
        "max_tokens": 120,
        "temperature": 0,
    })
}

const CALL: &str =
    "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";

/// The frames of a streamed response, `[DONE]` excluded.
async fn stream_chunks(server: &TestServer, key: Option<&str>, mut body: Value) -> Vec<Value> {
    body["stream"] = json!(true);
    let mut request = server
        .client
        .post(server.url("/v1/chat/completions"))
        .json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    let mut bytes = response.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// A streamed response put back together: content, reasoning, calls (name, arguments) and
/// the finish reason; checks the order OpenAI streams a call in.
fn reassemble(chunks: &[Value]) -> (String, String, Vec<(String, String)>, String) {
    let (mut content, mut reasoning, mut calls, mut finish) = (
        String::new(),
        String::new(),
        Vec::<(String, String)>::new(),
        String::new(),
    );
    for chunk in chunks {
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        let delta = &choice["delta"];
        content += delta["content"].as_str().unwrap_or("");
        reasoning += delta["reasoning_content"].as_str().unwrap_or("");
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap() as usize;
            if let Some(name) = call["function"]["name"].as_str() {
                assert_eq!(index, calls.len(), "calls are numbered in order");
                assert!(call["id"].as_str().unwrap().starts_with("call"));
                assert_eq!(call["type"], "function");
                calls.push((name.to_string(), String::new()));
            } else {
                assert!(index < calls.len(), "arguments come after the call's name");
            }
            calls[index].1 += call["function"]["arguments"].as_str().unwrap_or("");
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (content, reasoning, calls, finish)
}

#[tokio::test]
async fn the_models_calls_come_back_as_tool_calls_whole_and_streamed() {
    let server = TestServer::start_with(engine_config(PARROT)).await;
    server.state.set_chat_features(hermes());
    let body = parrot_chat("ok", CALL);
    let (status, whole) = server.post("/v1/chat/completions", body.clone()).await;
    assert_eq!(status, 200, "{whole}");
    let choice = &whole["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{whole}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(choice["message"]["content"], "ok\n");

    let (content, _, calls, finish) = reassemble(&stream_chunks(&server, None, body).await);
    assert_eq!(content, "ok\n");
    assert_eq!(
        calls,
        [("get_weather".to_string(), r#"{"city":"Paris"}"#.to_string())]
    );
    assert_eq!(finish, "tool_calls");

    // `tool_choice: none`, or no parser: the same text is only text.
    let mut none = parrot_chat("ok", CALL);
    none["tool_choice"] = json!("none");
    let (_, plain) = server.post("/v1/chat/completions", none).await;
    assert!(
        plain["choices"][0]["message"].get("tool_calls").is_none(),
        "{plain}"
    );
    assert_eq!(plain["choices"][0]["finish_reason"], "stop");
    server.wait_idle().await;
}

#[tokio::test]
async fn tool_calls_and_results_go_back_through_the_template() {
    let template = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/chat_templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
    );
    let config = engine_config(PARROT);
    let chat_template =
        pagoda_server::load_chat_template(&config.model_dir, Some(template)).unwrap();
    let engine = pagoda_runtime::start(config).unwrap();
    let state = pagoda_server::AppState::with_engine(
        vec![common::MODEL.into()],
        engine.clone(),
        chat_template,
    );
    let server = TestServer::start_state(state, engine, std::time::Duration::from_secs(5)).await;
    let body = json!({
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
        ],
        "tools": tools(),
        "max_tokens": 8,
    });
    let (status, reply) = server.post("/v1/chat/completions", body.clone()).await;
    assert_eq!(status, 200, "{reply}");
    let (_, tokens) = server
        .post(
            "/tokenize",
            json!({"messages": body["messages"], "tools": body["tools"]}),
        )
        .await;
    let (_, text) = server
        .post("/detokenize", json!({"tokens": tokens["tokens"]}))
        .await;
    let prompt = text["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("\"name\": \"get_weather\", \"description\": \"Weather in a city\""),
        "{prompt}"
    );
    assert!(prompt.contains("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"), "{prompt}");
    assert!(
        prompt.contains("<tool_response>\nsunny\n</tool_response>"),
        "{prompt}"
    );
    server.wait_idle().await;
}

fn scope_policy() -> String {
    r#"
[defaults]
tools = ["get_*", "fetch_url"]
[defaults.tool_arguments.fetch_url]
properties = { url = { type = "string", pattern = "^https://docs\\.example\\.com/" } }
"#
    .to_string()
}

const QUIET_GUARD: &str = r#"
[default]
canary = false
scan_output = false
prompt_overlap = 0
entities = {}
[default.injection]
action = "allow"
"#;

#[tokio::test]
async fn tool_scopes_refuse_offers_and_never_return_calls_out_of_scope() {
    let dir = tempfile::tempdir().unwrap();
    let s = GatewayServer::start_tuned(
        &scope_policy(),
        engine_config(PARROT),
        HttpLimits::default(),
    )
    .await;
    s.server.state.set_chat_features(hermes());
    let guard_policy = dir.path().join("guard.toml");
    std::fs::write(&guard_policy, QUIET_GUARD).unwrap();
    let audit = dir.path().join("audit.jsonl");
    let settings = GuardSettings {
        policy: guard_policy,
        audit_log: Some(audit.clone()),
        audit_key: None,
    };
    start_guard(&s.server.state, Some(&settings)).unwrap();
    let key = s.key("acme");

    // Offering a function outside the scope: 403 naming it.
    let mut offer = parrot_chat("ok", "hi");
    offer["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function", "function": {"name": "delete_all"}}));
    let r = s.post(Some(&key), "/v1/chat/completions", offer).await;
    assert_eq!(r.status, 403, "{}", r.json);
    assert_eq!(r.json["error"]["code"], "tool_not_allowed");
    assert!(r.json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("delete_all"));

    // The model calls a function the request never offered, and one with an argument
    // outside the tenant's narrowed schema: neither comes back, as a call or as text.
    for call in [
        "<tool_call>{\"name\": \"delete_all\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://evil.example/\"}}</tool_call>",
    ] {
        let r = s.post(Some(&key), "/v1/chat/completions", parrot_chat("ok", call)).await;
        assert_eq!(r.status, 200, "{}", r.json);
        let message = &r.json["choices"][0]["message"];
        assert!(message.get("tool_calls").is_none(), "{}", r.json);
        let content = message["content"].as_str().unwrap_or("");
        assert!(!content.contains("tool_call") && !content.contains("evil"), "{content}");
        let chunks = stream_chunks(&s.server, Some(&key), parrot_chat("ok", call)).await;
        let (content, _, calls, _) = reassemble(&chunks);
        assert!(calls.is_empty() && !content.contains("tool_call"), "{content}");
    }
    // An allowed call inside the narrowed schema does come back.
    let good = "<tool_call>{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://docs.example.com/a\"}}</tool_call>";
    let r = s
        .post(Some(&key), "/v1/chat/completions", parrot_chat("ok", good))
        .await;
    assert_eq!(
        r.json["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "fetch_url",
        "{}",
        r.json
    );

    let refused: Vec<Vec<String>> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|r| serde_json::from_value(r.get("tool_calls_refused")?.clone()).ok())
        .collect();
    assert_eq!(
        refused,
        [["delete_all"], ["delete_all"], ["fetch_url"], ["fetch_url"]]
            .map(|n| n.map(String::from).to_vec())
    );
    pagoda_guard::verify(&audit).unwrap();
    s.server.wait_idle().await;
}

fn forced(choice: Value, seed: u64) -> Value {
    json!({
        "messages": [{"role": "user", "content": "Call a tool."}],
        "tools": tools(),
        "tool_choice": choice,
        "max_tokens": 200,
        "temperature": 1.0,
        "seed": seed,
    })
}

#[tokio::test]
async fn forced_tool_choices_always_give_valid_calls() {
    let server = TestServer::start().await;
    let schemas: Vec<(String, Value)> = tools()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["function"]["name"].as_str().unwrap().to_string(),
                t["function"]["parameters"].clone(),
            )
        })
        .collect();
    let valid = |name: &str, arguments: &str| {
        let schema = &schemas.iter().find(|(n, _)| n == name).unwrap().1;
        let value: Value = serde_json::from_str(arguments).unwrap();
        jsonschema::validator_for(schema).unwrap().is_valid(&value)
    };
    let all_valid = |response: &Value| {
        response["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| {
                let f = &c["function"];
                valid(
                    f["name"].as_str().unwrap(),
                    f["arguments"].as_str().unwrap(),
                )
            })
    };
    for seed in 0..20 {
        // One call per response: a random model left free to add calls adds them without end.
        let mut required = forced(json!("required"), seed);
        required["parallel_tool_calls"] = json!(false);
        let (status, r) = server.post("/v1/chat/completions", required).await;
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["choices"][0]["finish_reason"], "tool_calls", "{r}");
        assert!(all_valid(&r), "{r}");
        let named = json!({"type": "function", "function": {"name": "fetch_url"}});
        let chunks = stream_chunks(&server, None, forced(named, seed)).await;
        let (_, _, calls, finish) = reassemble(&chunks);
        assert_eq!(finish, "tool_calls");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "fetch_url");
        assert!(valid("fetch_url", &calls[0].1), "{calls:?}");
    }
    // Parallel calls: every call in a finished list is valid.
    let mut finished = 0;
    for seed in 0..10 {
        let mut parallel = forced(json!("required"), seed);
        parallel["max_tokens"] = json!(400);
        let (_, r) = server.post("/v1/chat/completions", parallel).await;
        if r["choices"][0]["finish_reason"] == "tool_calls" {
            finished += 1;
            assert!(all_valid(&r), "{r}");
        }
    }
    assert!(finished > 0, "no list of calls finished");
    // A forced call and a response format both constrain: refused.
    let mut both = forced(json!("required"), 1);
    both["response_format"] = json!({"type": "json_object"});
    let (status, r) = server.post("/v1/chat/completions", both).await;
    assert_eq!(
        (status, r["error"]["param"].as_str()),
        (400, Some("response_format"))
    );
    server.wait_idle().await;
}

async fn reasoning_server(format: ReasoningFormat) -> TestServer {
    let server = TestServer::start_with(engine_config(PARROT)).await;
    server.state.set_chat_features(ChatFeatures {
        tool_parser: ToolParser::Off,
        reasoning: Some(format),
    });
    server
}

#[tokio::test]
async fn reasoning_content_is_split_from_the_answer_whole_and_streamed() {
    // The parrot writes "<think>plan\n</think>The answer.", as Qwen3 thinks.
    let server = reasoning_server(ReasoningFormat::Qwen3).await;
    let body = json!({
        "messages": [{"role": "system", "content": "<think>plan"}, {"role": "user", "content": "</think>The answer."}],
        "max_tokens": 60,
        "temperature": 0,
    });
    let (status, r) = server.post("/v1/chat/completions", body.clone()).await;
    assert_eq!(status, 200, "{r}");
    let message = &r["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "plan\n", "{r}");
    assert_eq!(message["content"], "The answer.");
    let chunks = stream_chunks(&server, None, body).await;
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["delta"]["reasoning_content"].is_string()));
    let (content, reasoning, _, _) = reassemble(&chunks);
    assert_eq!(
        (content.as_str(), reasoning.as_str()),
        ("The answer.", "plan\n")
    );
    server.wait_idle().await;
}

#[tokio::test]
async fn a_constraint_applies_to_the_answer_not_the_thinking() {
    // DeepSeek-R1 style: the output starts inside the thinking; the parrot writes
    // "free { text\n</think>{"a": 12}". The thinking is not JSON and must not be held to it.
    let server = reasoning_server(ReasoningFormat::DeepSeekR1).await;
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false});
    let body = json!({
        "messages": [{"role": "system", "content": "free { text"}, {"role": "user", "content": "</think>{\"a\": 12}"}],
        "max_tokens": 60,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    });
    let (status, r) = server.post("/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{r}");
    let message = &r["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "free { text\n", "{r}");
    let answer: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
    assert!(
        jsonschema::validator_for(&schema)
            .unwrap()
            .is_valid(&answer),
        "{answer}"
    );
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    server.wait_idle().await;
}
