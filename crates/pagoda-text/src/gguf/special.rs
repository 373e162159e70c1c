//! The special tokens a GGUF file names: BOS/EOS for chat templates and the tokenizer's
//! post-processor, end-of-turn tokens for the engine's stop rules.

use pagoda_gguf::GgufFile;

use super::vocab::{Meta, Vocab, TOKENS};
use super::{model_name, pre_tokenizers, TokenizerModel};
use crate::error::Result;

/// A token by id and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    pub id: u32,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GgufSpecialTokens {
    pub bos: Option<SpecialToken>,
    pub eos: Option<SpecialToken>,
    /// End of turn (Llama 3's `<|eot_id|>`).
    pub eot: Option<SpecialToken>,
    /// End of message (Llama 3.1's `<|eom_id|>`, ending a tool call).
    pub eom: Option<SpecialToken>,
    pub unk: Option<SpecialToken>,
    /// Whether encoding with special tokens starts with BOS / ends with EOS.
    pub add_bos: bool,
    pub add_eos: bool,
}

impl GgufSpecialTokens {
    /// Ids that end generation: EOS, EOT and EOM, each once.
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut ids = Vec::new();
        for token in [&self.eos, &self.eot, &self.eom].into_iter().flatten() {
            if !ids.contains(&token.id) {
                ids.push(token.id);
            }
        }
        ids
    }
}

/// The special tokens of a GGUF file's tokenizer.
pub fn special_tokens(file: &GgufFile) -> Result<GgufSpecialTokens> {
    let meta = Meta { file };
    let model = model_name(meta)?;
    let tokens = meta
        .strings(TOKENS)?
        .ok_or_else(|| meta.invalid(format!("GGUF metadata has no `{TOKENS}`")))?;
    read(meta, model, &tokens)
}

pub(super) fn from_vocab(
    meta: Meta<'_>,
    model: TokenizerModel,
    vocab: &Vocab<'_>,
) -> Result<GgufSpecialTokens> {
    read(meta, model, &vocab.tokens)
}

fn read(meta: Meta<'_>, model: TokenizerModel, tokens: &[&str]) -> Result<GgufSpecialTokens> {
    let spm = model == TokenizerModel::Llama;
    // SentencePiece models start with BOS unless told otherwise, and so does Llama 3
    // (llama.cpp's defaults).
    let bos_by_default = spm || pre_tokenizers::adds_bos_by_default(pre_tokenizers::name(meta)?);
    let token = |kind: &str, spm_default: Option<u32>| -> Result<Option<SpecialToken>> {
        let key = format!("tokenizer.ggml.{kind}_token_id");
        let id = match meta.token_id(&key, tokens.len())? {
            Some(id) => Some(id),
            // llama.cpp's defaults for SentencePiece vocabularies: <unk> <s> </s> first.
            None if spm => spm_default.filter(|&id| (id as usize) < tokens.len()),
            None => None,
        };
        Ok(id.map(|id| SpecialToken {
            id,
            text: tokens[id as usize].to_string(),
        }))
    };
    let special = GgufSpecialTokens {
        bos: token("bos", Some(1))?,
        eos: token("eos", Some(2))?,
        eot: token("eot", None)?,
        eom: token("eom", None)?,
        unk: token("unknown", Some(0))?,
        add_bos: meta
            .bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(bos_by_default),
        add_eos: meta.bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false),
    };
    if special.add_bos && special.bos.is_none() {
        return Err(meta
            .invalid("GGUF metadata sets `tokenizer.ggml.add_bos_token` but names no BOS token"));
    }
    if special.add_eos && special.eos.is_none() {
        return Err(meta
            .invalid("GGUF metadata sets `tokenizer.ggml.add_eos_token` but names no EOS token"));
    }
    Ok(special)
}
