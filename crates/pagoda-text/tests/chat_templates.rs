//! Chat templates rendered by Pagoda against transformers' `apply_chat_template`.
//!
//! `testdata/chat_templates/references.json` is written by `scripts/make_template_references.py`
//! from the real templates under `testdata/chat_templates/templates/` (llama.cpp's collection).
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pagoda_text::chat_template::{
    ChatMessage, ChatTemplate, ContentPart, MessageContent, RenderOptions,
};
use pagoda_text::TextError;
use serde_json::{json, Value};

/// How a case differs from transformers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Difference {
    DoesNotCompile,
    RendersDifferently,
    FailsWherePythonRenders,
    RendersWherePythonFails,
}
use Difference::*;

/// Known differences from transformers: a template, the one way its cases may differ, and
/// why. The test fails when a listed template no longer differs that way (remove it then),
/// and on any other difference.
const KNOWN_DIFFERENCES: &[(&str, Difference, &str)] = &[
    // minijinja iterates `none` as an empty list; Python raises on `{% for tool in tools %}`
    // when no tools are given. Pagoda renders these tool-use templates without tools.
    (
        "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
        RendersWherePythonFails,
        "for over none",
    ),
    (
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
        RendersWherePythonFails,
        "for over none",
    ),
    (
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        RendersWherePythonFails,
        "for over none",
    ),
    // `tools | map(...) | tojson`: Jinja2's `map` makes a generator that json.dumps rejects;
    // minijinja's makes a list, so Pagoda renders the tool list the template meant to.
    (
        "llama-cpp-deepseek-r1.jinja",
        RendersWherePythonFails,
        "map makes a generator in Python",
    ),
    // `"..."|safe + t | tojson`: in Python, Markup + str HTML-escapes the str, so the tool
    // JSON in the prompt reads `{&#34;name&#34;: ...}`; minijinja does not escape there.
    (
        "meetkai-functionary-medium-v3.1.jinja",
        RendersDifferently,
        "Markup + str escapes",
    ),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn testdata(rel: &str) -> PathBuf {
    workspace_root().join("testdata").join(rel)
}

fn options_from(json: &Value) -> RenderOptions {
    RenderOptions {
        add_generation_prompt: json["add_generation_prompt"].as_bool().unwrap_or(false),
        continue_final_message: json["continue_final_message"].as_bool().unwrap_or(false),
        tools: json.get("tools").cloned(),
        extra: json
            .get("extra")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    }
}

fn options_label(json: &Value) -> String {
    let mut parts = Vec::new();
    for (key, label) in [
        ("add_generation_prompt", "gen"),
        ("continue_final_message", "continue"),
        ("tools", "tools"),
        ("extra", "extra"),
    ] {
        if json.get(key).is_some_and(|v| v != &json!(false)) {
            parts.push(label);
        }
    }
    if parts.is_empty() {
        "plain".to_string()
    } else {
        parts.join("+")
    }
}

/// How one reference case differs, or `None` when it matches.
fn check_case(case: &Value, message_sets: &Value, fixed_now: i64) -> Option<(Difference, String)> {
    let path = testdata("chat_templates/templates").join(case["template"].as_str().unwrap());
    let token = |key: &str| case[key].as_str().map(str::to_string);
    let template = match ChatTemplate::from_file(&path, token("bos_token"), token("eos_token")) {
        Ok(t) => t.with_fixed_now(fixed_now),
        Err(e) => return Some((DoesNotCompile, e.to_string())),
    };
    let messages: Vec<ChatMessage> =
        serde_json::from_value(message_sets[case["messages_set"].as_str().unwrap()].clone())
            .unwrap();
    let rendered = template.render(&messages, &options_from(&case["options"]));
    match (rendered, case.get("expected").and_then(Value::as_str)) {
        (Ok(got), Some(expected)) if got == expected => None,
        (Ok(got), Some(expected)) => Some((RendersDifferently, first_difference(expected, &got))),
        (Err(e), Some(_)) => Some((FailsWherePythonRenders, e.to_string())),
        (Err(_), None) => None,
        (Ok(_), None) => Some((RendersWherePythonFails, case["expected_error"].to_string())),
    }
}

/// The first line that differs, which is what one needs to see to find the cause.
fn first_difference(expected: &str, got: &str) -> String {
    let (expected_lines, got_lines): (Vec<&str>, Vec<&str>) =
        (expected.split('\n').collect(), got.split('\n').collect());
    let line = (0..expected_lines.len().max(got_lines.len()))
        .find(|&i| expected_lines.get(i) != got_lines.get(i))
        .unwrap_or(0);
    format!(
        "rendered differently at line {}:\n  expected: {:?}\n  got:      {:?}",
        line + 1,
        expected_lines.get(line).unwrap_or(&"<end>"),
        got_lines.get(line).unwrap_or(&"<end>")
    )
}

#[test]
fn real_templates_render_like_transformers() {
    let references: Value = serde_json::from_str(
        &std::fs::read_to_string(testdata("chat_templates/references.json")).unwrap(),
    )
    .unwrap();
    // The script pins `strftime_now` to 2026-01-15T09:30:05.
    assert_eq!(references["fixed_now"], "2026-01-15T09:30:05");
    let fixed_now = 1_768_469_405;
    let cases = references["cases"].as_array().unwrap();
    let mut templates = BTreeSet::new();
    let mut differing = BTreeSet::new(); // (template, difference)
    let mut unexpected = Vec::new();
    let mut differing_cases = 0;
    for case in cases {
        let template = case["template"].as_str().unwrap();
        templates.insert(template);
        let id = format!(
            "{template}:{}:{}",
            case["messages_set"].as_str().unwrap(),
            options_label(&case["options"])
        );
        let Some((difference, why)) = check_case(case, &references["message_sets"], fixed_now)
        else {
            continue;
        };
        differing_cases += 1;
        differing.insert((template, difference));
        if !KNOWN_DIFFERENCES
            .iter()
            .any(|&(t, d, _)| t == template && d == difference)
        {
            unexpected.push(format!("{id}: {difference:?}: {why}"));
        }
    }
    let now_matching: Vec<_> = KNOWN_DIFFERENCES
        .iter()
        .filter(|&&(t, d, _)| !differing.contains(&(t, d)))
        .collect();
    let differing_templates: BTreeSet<&str> = differing.iter().map(|&(t, _)| t).collect();
    eprintln!(
        "{} templates, {} cases: {} match transformers, {} differ as known; {} templates match on every case",
        templates.len(),
        cases.len(),
        cases.len() - differing_cases,
        differing_cases - unexpected.len(),
        templates.len() - differing_templates.len(),
    );
    assert!(
        unexpected.is_empty() && now_matching.is_empty(),
        "known differences that no longer occur (remove them): {now_matching:#?}\n\
         unexpected differences:\n{}",
        unexpected.join("\n")
    );
}

fn tiny_qwen2() -> ChatTemplate {
    ChatTemplate::from_model_dir(&testdata("models/tiny-qwen2"))
        .unwrap()
        .expect("tiny-qwen2 has a chat template")
}

fn generation() -> RenderOptions {
    RenderOptions {
        add_generation_prompt: true,
        ..RenderOptions::default()
    }
}

#[test]
fn tiny_qwen2_chatml_template_renders_the_expected_prompt() {
    let messages = [
        ChatMessage::text("system", "Be brief."),
        ChatMessage::text("user", "Hi"),
    ];
    let prompt = tiny_qwen2().render(&messages, &generation()).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let prompt = tiny_qwen2()
        .render(&messages, &RenderOptions::default())
        .unwrap();
    assert!(prompt.ends_with("Hi<|im_end|>\n"), "{prompt}");
}

#[test]
fn raise_exception_surfaces_the_templates_message() {
    let template = ChatTemplate::from_source(
        "{% if messages[0].role != 'user' %}\n{{ raise_exception('Conversations must start with a user turn') }}\n{% endif %}"
            .into(),
        None,
        None,
    )
    .unwrap();
    let err = template
        .render(&[ChatMessage::text("assistant", "x")], &generation())
        .unwrap_err();
    let TextError::Template(message) = err else {
        panic!("not a template error: {err:?}")
    };
    assert_eq!(
        message,
        "Conversations must start with a user turn (template line 2)"
    );
}

#[test]
fn syntax_errors_name_the_line() {
    let err = ChatTemplate::from_source(
        "{% for m in messages %}\n{{ m.content }\n{% endfor %}".into(),
        None,
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("syntax error"), "{err}");
}

#[test]
fn continue_final_message_ends_inside_the_assistant_turn() {
    let messages = [
        ChatMessage::text("user", "Count to three."),
        ChatMessage::text("assistant", "One, two,"),
    ];
    let options = RenderOptions {
        continue_final_message: true,
        ..RenderOptions::default()
    };
    let prompt = tiny_qwen2().render(&messages, &options).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>user\nCount to three.<|im_end|>\n<|im_start|>assistant\nOne, two,"
    );
}

#[test]
fn continue_final_message_refuses_a_final_user_message() {
    let options = RenderOptions {
        continue_final_message: true,
        ..RenderOptions::default()
    };
    let err = tiny_qwen2()
        .render(&[ChatMessage::text("user", "Hi")], &options)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not an assistant message"), "{err}");
}

#[test]
fn non_text_content_parts_are_refused_naming_their_type() {
    let message = ChatMessage {
        content: Some(MessageContent::Parts(vec![
            ContentPart::text("What is in"),
            ContentPart {
                kind: "image_url".into(),
                text: None,
            },
        ])),
        ..ChatMessage::text("user", "")
    };
    let err = tiny_qwen2()
        .render(&[message], &generation())
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"image_url\""), "{err}");
}

#[test]
fn text_parts_reach_the_template_as_a_list() {
    let template = ChatTemplate::from_source(
        "{% for m in messages %}{% for p in m.content %}[{{ p.type }}:{{ p.text }}]{% endfor %}{% endfor %}".into(),
        None,
        None,
    )
    .unwrap();
    let message: ChatMessage =
        serde_json::from_value(json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}))
            .unwrap();
    assert_eq!(
        template.render(&[message], &generation()).unwrap(),
        "[text:a][text:b]"
    );
}

#[test]
fn model_dir_prefers_chat_template_jinja_and_reads_token_objects() {
    let dir = std::env::temp_dir().join(format!("pagoda-chat-template-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
            "chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "config"}]}"#,
    )
    .unwrap();
    let render = || {
        let template = ChatTemplate::from_model_dir(&dir).unwrap().unwrap();
        template.render(&[], &RenderOptions::default()).unwrap()
    };
    std::fs::write(
        dir.join("chat_template.jinja"),
        "{{ bos_token }}jinja{{ eos_token }}",
    )
    .unwrap();
    assert_eq!(render(), "<s>jinja</s>");
    std::fs::remove_file(dir.join("chat_template.jinja")).unwrap();
    assert_eq!(render(), "config");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn model_dir_without_a_template_has_none() {
    let dir = std::env::temp_dir().join(format!("pagoda-no-chat-template-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"eos_token": "</s>"}"#,
    )
    .unwrap();
    assert!(ChatTemplate::from_model_dir(&dir).unwrap().is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tojson_and_printing_follow_python() {
    let template = ChatTemplate::from_source(
        "{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}|{{ tools[0] }}|{{ none }}|{{ true }}|{{ 'a b'.split() }}".into(),
        None,
        None,
    )
    .unwrap();
    let options = RenderOptions {
        tools: Some(json!([{"name": "f", "x": 1.0, "é": [true, null]}])),
        ..RenderOptions::default()
    };
    assert_eq!(
        template.render(&[], &options).unwrap(),
        "[{\"name\": \"f\", \"x\": 1.0, \"é\": [true, null]}]|{\n  \"name\": \"f\",\n  \"x\": 1.0,\n  \"é\": [\n    true,\n    null\n  ]\n}|{'name': 'f', 'x': 1.0, 'é': [True, None]}|None|True|['a', 'b']"
    );
}

#[test]
fn templates_can_be_shared_across_request_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ChatTemplate>();
}

#[test]
fn strftime_now_reads_the_clock_unless_pinned() {
    let source = "{{ strftime_now('%Y-%m-%d') }}".to_string();
    let today = ChatTemplate::from_source(source.clone(), None, None)
        .unwrap()
        .render(&[], &RenderOptions::default())
        .unwrap();
    assert_eq!(today.len(), 10, "{today}");
    assert!(today.as_str() > "2025-01-01", "{today}");
    let pinned = ChatTemplate::from_source(source, None, None)
        .unwrap()
        .with_fixed_now(1_768_469_405)
        .render(&[], &RenderOptions::default())
        .unwrap();
    assert_eq!(pinned, "2026-01-15");
}

#[test]
fn extra_kwargs_reach_the_template_and_may_override_special_tokens() {
    let template = ChatTemplate::from_source(
        "{{ bos_token }}{% if enable_thinking is false %}no-think{% endif %}".into(),
        Some("<s>".into()),
        None,
    )
    .unwrap();
    let mut options = RenderOptions::default();
    options.extra.insert("enable_thinking".into(), json!(false));
    assert_eq!(template.render(&[], &options).unwrap(), "<s>no-think");
    options.extra.insert("bos_token".into(), json!("<BOS>"));
    assert_eq!(template.render(&[], &options).unwrap(), "<BOS>no-think");
}
