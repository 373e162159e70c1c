//! The tokenizer stored in a GGUF file's metadata (llama.cpp's `tokenizer.ggml.*` keys),
//! rebuilt as the Hugging Face tokenizer the model's tokenizer.json would give, so that a
//! GGUF checkpoint tokenizes as its original does: byte-level BPE ("gpt2") and SentencePiece
//! BPE ("llama").

mod added;
mod bpe;
mod pre_tokenizers;
mod special;
mod spm;
mod vocab;

use pagoda_gguf::GgufFile;

pub use special::{special_tokens, GgufSpecialTokens, SpecialToken};

use crate::error::Result;
use vocab::{Meta, Vocab};

const MODEL: &str = "tokenizer.ggml.model";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenizerModel {
    /// Byte-level BPE (GPT-2, Llama 3, Qwen2).
    Gpt2,
    /// SentencePiece (Llama 1/2, Mistral v0.1).
    Llama,
}

pub(crate) fn model_name(meta: Meta<'_>) -> Result<TokenizerModel> {
    match meta.str(MODEL)? {
        Some("gpt2") => Ok(TokenizerModel::Gpt2),
        Some("llama") => Ok(TokenizerModel::Llama),
        Some(other) => Err(meta.invalid(format!(
            "GGUF tokenizer model `{other}` is not supported: Pagoda reads gpt2 (BPE) and llama (SentencePiece)"
        ))),
        None => Err(meta.invalid(format!("GGUF metadata has no `{MODEL}`: no tokenizer"))),
    }
}

/// The `tokenizers` tokenizer of a GGUF file.
pub(crate) fn build_tokenizer(file: &GgufFile) -> Result<tokenizers::Tokenizer> {
    let meta = Meta { file };
    let model = model_name(meta)?;
    let vocab = Vocab::read(meta)?;
    let special = special::from_vocab(meta, model, &vocab)?;
    let mut tokenizer = match model {
        TokenizerModel::Gpt2 => bpe::build(meta, &vocab)?,
        TokenizerModel::Llama => spm::build(meta, &vocab, &special)?,
    };
    added::add_tokens(&mut tokenizer, &vocab);
    added::add_post_processor(&mut tokenizer, meta, &special)?;
    Ok(tokenizer)
}
