//! Chat templates: a checkpoint's Jinja template turned into a prompt string, rendered the
//! way Hugging Face transformers' `apply_chat_template(tokenize=False)` renders it.
mod continuation;
mod environment;
mod message;
mod pyjson;
mod source;
mod strftime;

use std::fmt;
use std::path::Path;

use minijinja::{Environment, Value};
use pagoda_gguf::GgufFile;
use serde_json::{Map, Value as Json};

pub use message::{ChatMessage, ContentPart, MessageContent, RenderOptions};

use crate::error::{Result, TextError};

/// A compiled chat template together with the special tokens it may refer to.
pub struct ChatTemplate {
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
    env: Environment<'static>,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("source_len", &self.source.len())
            .finish()
    }
}

impl ChatTemplate {
    /// The template of a model directory: `chat_template.jinja` if present (newer
    /// checkpoints), else `chat_template` of `tokenizer_config.json` (a string, or a list of
    /// `{name, template}` of which "default" is taken). bos/eos come from
    /// `tokenizer_config.json`. `Ok(None)` when the model has no chat template.
    pub fn from_model_dir(dir: &Path) -> Result<Option<ChatTemplate>> {
        let Some(found) = source::find_in_model_dir(dir)? else {
            return Ok(None);
        };
        let template = ChatTemplate::from_source(found.source, found.bos_token, found.eos_token)
            .map_err(|e| in_file(e, &found.origin))?;
        Ok(Some(template))
    }

    /// The template of a GGUF file (`tokenizer.chat_template`), with the BOS/EOS token
    /// strings of its vocabulary. `Ok(None)` when the file has no chat template.
    pub fn from_gguf(file: &GgufFile) -> Result<Option<ChatTemplate>> {
        const KEY: &str = "tokenizer.chat_template";
        let source = match file.get(KEY) {
            None => return Ok(None),
            Some(value) => value.as_str().ok_or_else(|| TextError::Gguf {
                path: file.path.clone(),
                reason: format!("GGUF metadata `{KEY}` is not a string"),
            })?,
        };
        let special = crate::gguf::special_tokens(file)?;
        let template = ChatTemplate::from_source(
            source.to_string(),
            special.bos.map(|t| t.text),
            special.eos.map(|t| t.text),
        )
        .map_err(|e| in_file(e, &file.path))?;
        Ok(Some(template))
    }

    /// A template file given on the command line (`--chat-template FILE`).
    pub fn from_file(
        path: &Path,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<ChatTemplate> {
        let source = std::fs::read_to_string(path).map_err(|e| TextError::Config {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        ChatTemplate::from_source(source, bos_token, eos_token).map_err(|e| in_file(e, path))
    }

    /// Compiles `source`; syntax errors are reported here with their line.
    pub fn from_source(
        source: String,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<ChatTemplate> {
        let env = environment::build(source.clone(), None).map_err(template_error)?;
        Ok(ChatTemplate {
            source,
            bos_token,
            eos_token,
            env,
        })
    }

    /// Pins `strftime_now` to a Unix time (UTC), for reproducible prompts and tests.
    pub fn with_fixed_now(mut self, unix_seconds: i64) -> ChatTemplate {
        // The source compiled once already, so it compiles again.
        if let Ok(env) = environment::build(self.source.clone(), Some(unix_seconds)) {
            self.env = env;
        }
        self
    }

    /// The template text as loaded.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders a conversation into a prompt string.
    pub fn render(&self, messages: &[ChatMessage], options: &RenderOptions) -> Result<String> {
        let mut messages = messages
            .iter()
            .map(message::to_template_json)
            .collect::<Result<Vec<_>>>()?;
        if !options.continue_final_message {
            return self.render_json(messages, options);
        }
        let cut = continuation::mark_final_message(&mut messages, options, &self.source)?;
        let rendered = self.render_json(messages, options)?;
        cut.apply(rendered)
    }

    fn render_json(&self, messages: Vec<Json>, options: &RenderOptions) -> Result<String> {
        let context = self.context(messages, options);
        let template = self
            .env
            .get_template(environment::TEMPLATE_NAME)
            .map_err(template_error)?;
        template
            .render(Value::from_serialize(&context))
            .map_err(template_error)
    }

    /// The variables transformers passes: special tokens, then the caller's extra kwargs
    /// (which may override them), then `messages`, `tools`, `documents` and
    /// `add_generation_prompt`. `tools` and `documents` are defined even when absent (None),
    /// as in Python, which some templates test with `is defined`.
    fn context(&self, messages: Vec<Json>, options: &RenderOptions) -> Map<String, Json> {
        let mut context = Map::new();
        if let Some(bos) = &self.bos_token {
            context.insert("bos_token".into(), Json::String(bos.clone()));
        }
        if let Some(eos) = &self.eos_token {
            context.insert("eos_token".into(), Json::String(eos.clone()));
        }
        for (key, value) in &options.extra {
            context.insert(key.clone(), value.clone());
        }
        context.insert("messages".into(), Json::Array(messages));
        context.insert("tools".into(), options.tools.clone().unwrap_or(Json::Null));
        context.insert("documents".into(), Json::Null);
        context.insert(
            "add_generation_prompt".into(),
            Json::Bool(options.add_generation_prompt),
        );
        context
    }
}

/// Names the file a template error comes from.
fn in_file(err: TextError, path: &Path) -> TextError {
    match err {
        TextError::Template(message) => {
            TextError::Template(format!("{}: {message}", path.display()))
        }
        other => other,
    }
}

/// A minijinja error as a user-facing message: what went wrong and on which template line.
/// `raise_exception(msg)` keeps just its message, which is meant for the user.
fn template_error(err: minijinja::Error) -> TextError {
    let raised =
        std::error::Error::source(&err).is_some_and(|s| s.is::<environment::RaisedByTemplate>());
    let what = match (raised, err.detail()) {
        (true, Some(detail)) => detail.to_string(),
        (false, Some(detail)) => format!("{}: {detail}", err.kind()),
        (_, None) => err.kind().to_string(),
    };
    match err.line() {
        Some(line) => TextError::Template(format!("{what} (template line {line})")),
        None => TextError::Template(what),
    }
}
