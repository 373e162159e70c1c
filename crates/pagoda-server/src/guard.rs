//! The server's side of the guardrails (pagoda-guard), called by the request pipeline at
//! fixed points: `screen_chat` / `screen_prompts` before the prompt is rendered or
//! tokenized, `filter_texts` on non-streamed choices, `StreamGuard::filter` on every
//! streamed output. It knows nothing of the server's state: the pipeline hands it the
//! shared `ServerGuard` when one is configured.
//!
//! Every decision goes to the audit log (when one is configured) with entity types, counts
//! and rule ids, never the values.

use std::path::PathBuf;
use std::sync::Arc;

use pagoda_guard::audit::{AuditEvent, AuditKey, AuditLog, Decision, Stage};
use pagoda_guard::canary::{new_canary, with_canary};
use pagoda_guard::{
    Guard, MessageText, OutputGuard, Policies, Policy, Refusal, Screened, TenantName,
};
use pagoda_runtime::RequestOutput;
use pagoda_text::chat_template::{ChatMessage, MessageContent};
use pagoda_text::Tokenizer;

use serde_json::Value;

use crate::error::{ApiError, ServerError};
use crate::guard_metrics::GuardCounters;
use crate::pipeline::validate::ChatInput;
use crate::wire::request::PromptInput;
use pagoda_gateway::Caller;

/// `--guard-config`, `--audit-log` and `--audit-key`.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardSettings {
    pub policy: PathBuf,
    pub audit_log: Option<PathBuf>,
    /// Makes the log a keyed (HMAC) chain.
    pub audit_key: Option<PathBuf>,
}

/// Policies and scanners, and the audit log; shared by all requests.
pub struct ServerGuard {
    guard: Guard,
    audit: Option<AuditLog>,
    /// The chain's key, to verify the log with (the console).
    audit_key: Option<AuditKey>,
    counters: GuardCounters,
}

/// Loads the policy and opens the audit log before the server takes requests.
pub fn open(settings: &GuardSettings) -> Result<Arc<ServerGuard>, ServerError> {
    let policies = Policies::load(&settings.policy)?;
    let key = settings
        .audit_key
        .as_deref()
        .map(AuditKey::load)
        .transpose()?;
    let audit = settings
        .audit_log
        .as_deref()
        .map(|path| AuditLog::open_with(path, key.clone()))
        .transpose()?;
    tracing::info!(
        policy = %settings.policy.display(),
        audit = ?settings.audit_log,
        "guardrails on"
    );
    Ok(Arc::new(ServerGuard {
        guard: Guard::new(policies),
        audit,
        audit_key: key,
        counters: GuardCounters::default(),
    }))
}

/// The tenant whose policy applies: the gateway's authenticated caller, else none (the
/// default policy).
fn tenant_of(caller: Option<&Caller>) -> Option<TenantName> {
    caller.map(|c| TenantName(c.tenant.as_str().to_string()))
}

/// One request's guardrail state: its policy, placeholders and canary.
pub struct Guarded {
    shared: Arc<ServerGuard>,
    policy: Policy,
    screened: Screened,
    canary: Option<String>,
    request_id: String,
    tenant: Option<TenantName>,
}

/// Screens every string of a chat request that reaches the template (contents and parts,
/// names, tool calls and ids, tool definitions, template kwargs) before it is rendered:
/// refuses (400), or rewrites PII in place and puts a canary at the start of the system
/// prompt. Multi-part contents are also screened joined, as the template will see them.
pub fn screen_chat(
    shared: &Arc<ServerGuard>,
    caller: Option<&Caller>,
    request_id: &str,
    chat: &mut ChatInput,
) -> Result<Arc<Guarded>, ApiError> {
    let mut texts: Vec<(String, String)> = Vec::new();
    visit_texts(chat, &mut |role, text| {
        texts.push((role.to_string(), text.clone()))
    });
    let mut joined = joined_parts(&chat.messages);
    if let Some(tools) = &chat.tools {
        joined.push(("user".into(), json_keys(tools)));
    }
    if let Some(kwargs) = &chat.chat_template_kwargs {
        joined.push(("user".into(), json_keys(&Value::Object(kwargs.clone()))));
    }
    let guarded = screen(shared, caller, request_id, &texts, &joined)?;
    let mut rewritten = guarded.screened.rewritten.iter();
    visit_texts(chat, &mut |_, text| {
        if let Some(Some(new)) = rewritten.next() {
            *text = new.clone();
        }
    });
    if let Some(canary) = &guarded.canary {
        // At the start: a model reciting its system prompt reaches the canary first.
        if let Some(system) = chat.messages.iter_mut().find(|m| m.role == "system") {
            if let Some(MessageContent::Text(t)) = &mut system.content {
                *t = format!("{}\n{t}", with_canary("", canary));
            }
        }
    }
    Ok(Arc::new(guarded))
}

/// Calls `f` on every string the chat template can see, with the role it speaks for (the
/// caller's own definitions and kwargs speak as `user`), always in the same order, so a
/// second walk can write back what the first one read.
fn visit_texts(chat: &mut ChatInput, f: &mut dyn FnMut(&str, &mut String)) {
    for m in &mut chat.messages {
        let role = m.role.as_str();
        match &mut m.content {
            Some(MessageContent::Text(t)) => f(role, t),
            Some(MessageContent::Parts(parts)) => {
                for t in parts.iter_mut().filter_map(|p| p.text.as_mut()) {
                    f(role, t);
                }
            }
            None => {}
        }
        for t in [&mut m.name, &mut m.tool_call_id].into_iter().flatten() {
            f(role, t);
        }
        if let Some(calls) = &mut m.tool_calls {
            visit_json(calls, role, f);
        }
    }
    if let Some(tools) = &mut chat.tools {
        visit_json(tools, "user", f);
    }
    if let Some(kwargs) = &mut chat.chat_template_kwargs {
        for v in kwargs.values_mut() {
            visit_json(v, "user", f);
        }
    }
}

fn visit_json(value: &mut Value, role: &str, f: &mut dyn FnMut(&str, &mut String)) {
    match value {
        Value::String(s) => f(role, s),
        Value::Array(items) => items.iter_mut().for_each(|v| visit_json(v, role, f)),
        Value::Object(map) => map.values_mut().for_each(|v| visit_json(v, role, f)),
        _ => {}
    }
}

/// Object keys of a JSON value, space-separated: screened for injection only (a template
/// prints property names of tool schemas).
fn json_keys(value: &Value) -> String {
    fn walk(value: &Value, out: &mut String) {
        match value {
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => {
                for (k, v) in map {
                    out.push_str(k);
                    out.push(' ');
                    walk(v, out);
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

/// Multi-part contents joined as `prompt::render_chat` joins them.
fn joined_parts(messages: &[ChatMessage]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match &m.content {
            Some(MessageContent::Parts(parts)) if parts.len() > 1 => {
                let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
                Some((m.role.clone(), texts.join("\n")))
            }
            _ => None,
        })
        .collect()
}

/// Screens completions prompts (token prompts are decoded to be read, and become text if
/// they must be rewritten). No canary: there is no system prompt.
pub fn screen_prompts(
    shared: &Arc<ServerGuard>,
    caller: Option<&Caller>,
    request_id: &str,
    tokenizer: &Tokenizer,
    prompt: &mut PromptInput,
) -> Result<Arc<Guarded>, ApiError> {
    let decode = |ids: &[u32]| tokenizer.decode(ids, false).unwrap_or_default();
    let texts: Vec<String> = match &*prompt {
        PromptInput::Text(t) => vec![t.clone()],
        PromptInput::Texts(ts) => ts.clone(),
        PromptInput::Tokens(ids) => vec![decode(ids)],
        PromptInput::TokenLists(lists) => lists.iter().map(|l| decode(l)).collect(),
    };
    let pairs: Vec<(String, String)> = texts.iter().map(|t| ("user".into(), t.clone())).collect();
    let mut guarded = screen(shared, caller, request_id, &pairs, &[])?;
    guarded.canary = None;
    if guarded.screened.rewritten.iter().any(Option::is_some) {
        let new: Vec<String> = texts
            .into_iter()
            .zip(&guarded.screened.rewritten)
            .map(|(old, new)| new.clone().unwrap_or(old))
            .collect();
        *prompt =
            if new.len() == 1 && matches!(prompt, PromptInput::Text(_) | PromptInput::Tokens(_)) {
                PromptInput::Text(new.into_iter().next().unwrap_or_default())
            } else {
                PromptInput::Texts(new)
            };
    }
    Ok(Arc::new(guarded))
}

fn as_messages(texts: &[(String, String)]) -> Vec<MessageText<'_>> {
    texts
        .iter()
        .map(|(role, text)| MessageText { role, text })
        .collect()
}

fn screen(
    shared: &Arc<ServerGuard>,
    caller: Option<&Caller>,
    request_id: &str,
    texts: &[(String, String)],
    joined: &[(String, String)],
) -> Result<Guarded, ApiError> {
    let tenant = tenant_of(caller);
    let policy = shared.guard.policy(tenant.as_ref()).clone();
    let screened = shared
        .guard
        .screen(&policy, &as_messages(texts), &as_messages(joined));
    let decision = match &screened.refusal {
        Some(_) => Decision::Block,
        None if screened.flagged => Decision::Flag,
        None if screened.rewritten.iter().any(Option::is_some) => Decision::Transform,
        None => Decision::Allow,
    };
    let guarded = Guarded {
        shared: shared.clone(),
        canary: policy.canary.then(new_canary),
        policy,
        screened,
        request_id: request_id.to_string(),
        tenant,
    };
    guarded.audit(AuditEvent {
        request_id: guarded.request_id.clone(),
        tenant: guarded.tenant.as_ref().map(|t| t.0.clone()),
        stage: Stage::Request,
        decision,
        entities: guarded.screened.entities.clone(),
        rules: guarded.screened.injection.rules.clone(),
        injection_score: Some(guarded.screened.injection.score),
        canary_leaked: false,
        prompt_leaked: false,
        incomplete: false,
        tool_calls_refused: Vec::new(),
    })?;
    match &guarded.screened.refusal {
        Some(Refusal::Pii(kinds)) => Err(ApiError::PiiDetected(
            kinds.iter().map(|k| k.name()).collect(),
        )),
        Some(Refusal::Injection { .. }) => Err(ApiError::PromptInjection),
        None => Ok(guarded),
    }
}

impl ServerGuard {
    /// Records the tool calls of a response that were refused rather than returned; a log
    /// that cannot be written fails the response.
    pub fn audit_refused_tool_calls(
        &self,
        request_id: &str,
        caller: Option<&Caller>,
        names: Vec<String>,
    ) -> Result<(), ApiError> {
        self.record(AuditEvent {
            request_id: request_id.to_string(),
            tenant: tenant_of(caller).map(|t| t.0),
            stage: Stage::Response,
            decision: Decision::Block,
            entities: Default::default(),
            rules: Vec::new(),
            injection_score: None,
            canary_leaked: false,
            prompt_leaked: false,
            incomplete: false,
            tool_calls_refused: names,
        })
    }

    /// Counts a decision and writes its audit record; a log that cannot be written refuses
    /// the request rather than serve it unrecorded.
    fn record(&self, event: AuditEvent) -> Result<(), ApiError> {
        self.counters.observe(&event);
        match &self.audit {
            Some(log) => log
                .append(event)
                .map(|_| ())
                .map_err(|e| ApiError::Internal(e.to_string())),
            None => Ok(()),
        }
    }

    /// The audit log's path and chain key, if there is a log.
    pub fn audit_log(&self) -> Option<(std::path::PathBuf, Option<AuditKey>)> {
        let log = self.audit.as_ref()?;
        Some((log.path().to_path_buf(), self.audit_key.clone()))
    }

    /// The decision counters for `/metrics`.
    pub fn render_metrics(&self, out: &mut String) {
        self.counters.render(out);
    }

    /// The audit log's head, for anchoring.
    pub fn audit_head(&self) -> Option<(std::path::PathBuf, u64, String)> {
        let log = self.audit.as_ref()?;
        let (seq, hash) = log.head();
        Some((log.path().to_path_buf(), seq, hash))
    }
}

impl Guarded {
    /// Whether any output filter can change this request's output.
    pub fn filters_output(&self) -> bool {
        self.policy.scan_output
            || self.canary.is_some()
            || self.screened.prompt.is_some()
            || (self.policy.restore && !self.screened.placeholders.is_empty())
    }

    fn output(&self) -> OutputGuard {
        self.shared
            .guard
            .output(&self.policy, &self.screened, self.canary.as_deref())
    }

    fn audit(&self, event: AuditEvent) -> Result<(), ApiError> {
        self.shared.record(event)
    }

    /// The response's record: what the output filters did over all choices (`incomplete`:
    /// the client left before they all finished). A record that cannot be written fails the
    /// response, as at the request stage.
    fn audit_response(
        &self,
        outputs: &[OutputGuard],
        ended: bool,
        incomplete: bool,
    ) -> Result<(), ApiError> {
        let mut entities = std::collections::BTreeMap::new();
        let mut leaked = false;
        let mut prompt_leaked = false;
        for o in outputs {
            let r = o.report();
            leaked |= r.canary_leaked;
            prompt_leaked |= r.prompt_leaked;
            for (k, n) in r.counts {
                *entities.entry(k).or_insert(0) += n;
            }
        }
        let decision = if ended {
            Decision::End
        } else if leaked || !entities.is_empty() {
            Decision::Transform
        } else {
            Decision::Allow
        };
        let event = AuditEvent {
            request_id: self.request_id.clone(),
            tenant: self.tenant.as_ref().map(|t| t.0.clone()),
            stage: Stage::Response,
            decision,
            entities,
            rules: Vec::new(),
            injection_score: None,
            canary_leaked: leaked,
            prompt_leaked,
            incomplete,
            tool_calls_refused: Vec::new(),
        };
        self.audit(event)
    }
}

/// Filters the texts of finished, non-streamed choices; `Err` when the response's audit
/// record cannot be written (then nothing is sent).
pub fn filter_texts<'a>(
    guarded: Option<&Arc<Guarded>>,
    texts: impl IntoIterator<Item = &'a mut String>,
) -> Result<(), ApiError> {
    let Some(g) = guarded else { return Ok(()) };
    let mut outputs = Vec::new();
    let mut ended = false;
    for text in texts {
        let mut out = g.output();
        let emitted = out.filter_all(text);
        *text = emitted.text;
        ended |= emitted.stop;
        outputs.push(out);
    }
    g.audit_response(&outputs, ended, false)
}

/// The output filters of a streamed response, one per choice.
pub struct StreamGuard {
    guarded: Arc<Guarded>,
    outputs: Vec<OutputGuard>,
    finished: Vec<bool>,
    ended: bool,
    recorded: bool,
}

impl StreamGuard {
    pub fn new(guarded: Option<Arc<Guarded>>, choices: usize) -> Option<StreamGuard> {
        let guarded = guarded?;
        Some(StreamGuard {
            outputs: (0..choices).map(|_| guarded.output()).collect(),
            finished: vec![false; choices],
            ended: false,
            recorded: false,
            guarded,
        })
    }

    /// Rewrites one engine output's text delta in place (held-back text is released when the
    /// choice finishes); after a leak that ends the response, the choice sends nothing more.
    /// `Err` when the last choice finished and the response's record cannot be written: the
    /// stream then ends with an error instead.
    pub fn filter(
        guard: &mut Option<StreamGuard>,
        index: usize,
        out: &mut RequestOutput,
    ) -> Result<(), ApiError> {
        let Some(g) = guard else { return Ok(()) };
        let Some(filter) = g.outputs.get_mut(index) else {
            return Ok(());
        };
        let mut emitted = filter.push(&out.text);
        if out.finished.is_some() && !emitted.stop {
            let rest = filter.finish();
            emitted.text.push_str(&rest.text);
            emitted.stop = rest.stop;
        }
        out.text = emitted.text;
        g.ended |= emitted.stop;
        if out.finished.is_some() {
            g.finished[index] = true;
            if g.finished.iter().all(|&f| f) {
                g.recorded = true;
                return g.guarded.audit_response(&g.outputs, g.ended, false);
            }
        }
        Ok(())
    }
}

impl Drop for StreamGuard {
    /// A client that leaves early (after a leak, say) still leaves a record.
    fn drop(&mut self) {
        if !self.recorded {
            if let Err(e) = self.guarded.audit_response(&self.outputs, self.ended, true) {
                tracing::error!(error = %e, "cannot write the audit record of an abandoned response");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pagoda_guard::verify;
    use pagoda_runtime::{Completion, FinishReason, Timings, Usage};

    use super::*;

    fn guarded_state(policy: &str, dir: &std::path::Path) -> Arc<ServerGuard> {
        let path = dir.join("guard.toml");
        std::fs::write(&path, policy).unwrap();
        let settings = GuardSettings {
            policy: path,
            audit_log: Some(dir.join("audit.jsonl")),
            audit_key: None,
        };
        open(&settings).unwrap()
    }

    fn output(index: usize, text: &str, last: bool) -> RequestOutput {
        RequestOutput {
            index,
            token_ids: vec![1],
            text: text.into(),
            logprobs: Vec::new(),
            cached_tokens: None,
            finished: last.then(|| Completion {
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
                timings: Timings::default(),
                error: None,
                cause: Default::default(),
            }),
        }
    }

    /// Feeds deltas of one choice through the stream hook, as the routes do.
    fn stream(guard: &mut Option<StreamGuard>, index: usize, deltas: &[&str]) -> String {
        let mut sent = String::new();
        for (i, d) in deltas.iter().enumerate() {
            let mut out = output(index, d, i + 1 == deltas.len());
            StreamGuard::filter(guard, index, &mut out).unwrap();
            sent.push_str(&out.text);
        }
        sent
    }

    #[test]
    fn streamed_choices_are_redacted_restored_and_cut_at_a_leak() {
        let dir = tempfile::tempdir().unwrap();
        let policy = "[default]\nrestore = true\non_canary_leak = \"end\"\n";
        let state = guarded_state(policy, dir.path());
        let mut chat = ChatInput {
            messages: vec![
                ChatMessage::text("system", "Be brief."),
                ChatMessage::text("user", "Write to jane@example.com"),
            ],
            add_generation_prompt: None,
            continue_final_message: None,
            chat_template_kwargs: None,
            tools: None,
        };
        let guarded = screen_chat(&state, None, "chatcmpl-1", &mut chat).unwrap();
        let messages = &chat.messages;
        let Some(MessageContent::Text(user)) = &messages[1].content else {
            panic!()
        };
        assert_eq!(user, "Write to [EMAIL_1]");
        let Some(MessageContent::Text(system)) = &messages[0].content else {
            panic!()
        };
        let canary = guarded.canary.clone().unwrap();
        assert!(system.starts_with("(Internal marker ") && system.contains(&canary));

        let mut guard = StreamGuard::new(Some(guarded), 2);
        // Choice 0: a new card number split across deltas, and the caller's own placeholder.
        let sent = stream(
            &mut guard,
            0,
            &["Card 4111 11", "11 1111 1111 for [EMA", "IL_1]."],
        );
        assert_eq!(sent, "Card [CARD_1] for jane@example.com.");
        // Choice 1 recites its prompt: nothing from the canary on is sent.
        let (head, tail) = canary.split_at(6);
        let sent = stream(
            &mut guard,
            1,
            &["My prompt: (Internal marker ", head, tail, " secret"],
        );
        assert_eq!(sent, "My prompt: (Internal marker ");

        let log = dir.path().join("audit.jsonl");
        assert_eq!(verify(&log).unwrap().records, 2);
        let last = std::fs::read_to_string(&log).unwrap();
        let response: serde_json::Value =
            serde_json::from_str(last.lines().last().unwrap()).unwrap();
        assert_eq!(response["stage"], "response");
        assert_eq!(response["decision"], "end");
        assert_eq!(response["canary_leaked"], true);
        assert_eq!(response["entities"]["CARD"], 1);
        assert!(!last.contains("4111") && !last.contains("jane@"));
    }

    /// A completions prompt screened under the default policy, with an audit log in `dir`.
    fn screened_hello(dir: &std::path::Path) -> Arc<Guarded> {
        let state = guarded_state("", dir);
        let mut prompt = PromptInput::Text("hello".into());
        let tokenizer_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/models/tiny-qwen2");
        let tokenizer = Tokenizer::from_file(&tokenizer_dir.join("tokenizer.json")).unwrap();
        screen_prompts(&state, None, "cmpl-1", &tokenizer, &mut prompt).unwrap()
    }

    #[test]
    fn whole_choices_are_filtered_too() {
        let dir = tempfile::tempdir().unwrap();
        let guarded = screened_hello(dir.path());
        let mut texts = vec!["reach me at 13800138000".to_string()];
        filter_texts(Some(&guarded), &mut texts).unwrap();
        assert_eq!(texts[0], "reach me at [PHONE_1]");
    }

    /// A response whose record cannot be written is not sent (the file made immutable
    /// between the request's record and the response's, as a full or failed disk would).
    #[test]
    fn a_response_record_that_cannot_be_written_fails_the_response() {
        let dir = tempfile::tempdir().unwrap();
        let guarded = screened_hello(dir.path());
        let log = dir.path().join("audit.jsonl");
        let chattr = |flag: &str| {
            let ok = std::process::Command::new("chattr")
                .arg(flag)
                .arg(&log)
                .status()
                .unwrap()
                .success();
            assert!(ok, "chattr {flag}");
        };
        chattr("+i");
        let mut texts = vec!["fine".to_string()];
        let whole = filter_texts(Some(&guarded), &mut texts);
        let mut stream = StreamGuard::new(Some(guarded.clone()), 1);
        let streamed = StreamGuard::filter(&mut stream, 0, &mut output(0, "fine", true));
        chattr("-i");
        assert!(matches!(whole, Err(ApiError::Internal(_))), "{whole:?}");
        assert!(
            matches!(streamed, Err(ApiError::Internal(_))),
            "{streamed:?}"
        );
    }
}
