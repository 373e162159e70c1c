//! What both tokenizer models share: control and user-defined tokens matched in raw text,
//! and BOS/EOS around an encoding with special tokens.

use tokenizers::processors::template::{SpecialToken, TemplateProcessing};
use tokenizers::AddedToken;

use super::special::GgufSpecialTokens;
use super::vocab::{Meta, Vocab};
use crate::error::Result;

/// Control and unknown tokens become special added tokens, user-defined ones plain added
/// tokens, so their strings in a prompt are recognised (as Hugging Face's added tokens are)
/// and `skip_special_tokens` drops the special ones. Each is in the model's vocabulary
/// already, so it keeps its GGUF id.
pub fn add_tokens(tokenizer: &mut tokenizers::Tokenizer, vocab: &Vocab<'_>) {
    let added = |special: bool| -> Vec<AddedToken> {
        vocab
            .tokens
            .iter()
            .zip(&vocab.types)
            .filter(|&(token, kind)| {
                !token.is_empty() && kind.is_added() && kind.is_special() == special
            })
            .map(|(&token, _)| AddedToken::from(token, special).normalized(false))
            .collect()
    };
    tokenizer.add_special_tokens(&added(true));
    tokenizer.add_tokens(&added(false));
}

/// BOS before and EOS after each sequence, as transformers' Llama tokenizers template it
/// (`add_bos_token`, `add_eos_token`); nothing when neither is added.
pub fn add_post_processor(
    tokenizer: &mut tokenizers::Tokenizer,
    meta: Meta<'_>,
    special: &GgufSpecialTokens,
) -> Result<()> {
    let bos = special.bos.as_ref().filter(|_| special.add_bos);
    let eos = special.eos.as_ref().filter(|_| special.add_eos);
    if bos.is_none() && eos.is_none() {
        return Ok(());
    }
    // Template pieces name entries of the token table, not token texts, so a token text
    // with a space or a colon cannot upset the template syntax.
    let mut tokens = Vec::new();
    let sequence = |seq: &str, type_id: u32| {
        let mut pieces = Vec::new();
        if bos.is_some() {
            pieces.push(format!("bos:{type_id}"));
        }
        pieces.push(format!("{seq}:{type_id}"));
        if eos.is_some() {
            pieces.push(format!("eos:{type_id}"));
        }
        pieces
    };
    let single = sequence("$A", 0);
    let pair = [single.clone(), sequence("$B", 1)].concat();
    for (name, token) in [("bos", bos), ("eos", eos)] {
        if let Some(token) = token {
            tokens.push(
                SpecialToken::new(name.into(), vec![token.id], vec![token.text.clone()])
                    .map_err(|e| meta.invalid(e.to_string()))?,
            );
        }
    }
    let bad = |e: String| meta.invalid(format!("cannot build the BOS/EOS template: {e}"));
    let mut builder = TemplateProcessing::builder();
    builder.try_single(single).map_err(bad)?;
    builder.try_pair(pair).map_err(bad)?;
    let processor = builder
        .special_tokens(tokens)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    tokenizer.with_post_processor(Some(processor));
    Ok(())
}
