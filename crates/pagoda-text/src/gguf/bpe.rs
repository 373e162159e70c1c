//! `tokenizer.ggml.model = "gpt2"`: byte-level BPE with the file's own merges.

use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::models::bpe::BPE;

use super::pre_tokenizers::{self, KEY, SUPPORTED};
use super::vocab::{Meta, Vocab};
use crate::error::Result;

const MERGES: &str = "tokenizer.ggml.merges";

pub fn build(meta: Meta<'_>, vocab: &Vocab<'_>) -> Result<tokenizers::Tokenizer> {
    let pre_name = pre_tokenizers::name(meta)?;
    let pre = pre_tokenizers::for_name(pre_name).ok_or_else(|| {
        meta.invalid(format!(
            "GGUF pre-tokenizer `{pre_name}` ({KEY}) is not supported: Pagoda reads {SUPPORTED}"
        ))
    })?;
    let merges = merges(meta, vocab)?;
    let model = BPE::builder()
        .vocab_and_merges(vocab.model_vocab(), merges)
        .ignore_merges(pre.ignore_merges)
        .build()
        .map_err(|e| meta.invalid(format!("cannot build the BPE model: {e}")))?;
    let mut tokenizer = tokenizers::Tokenizer::new(model);
    tokenizer
        .with_normalizer(pre.normalizer)
        .with_pre_tokenizer(Some(pre.pre_tokenizer))
        .with_decoder(Some(ByteLevel::default()));
    Ok(tokenizer)
}

/// `tokenizer.ggml.merges`: "left right" pairs, best first, each naming tokens whose
/// concatenation is a token too.
fn merges(meta: Meta<'_>, vocab: &Vocab<'_>) -> Result<Vec<(String, String)>> {
    let lines = meta
        .strings(MERGES)?
        .ok_or_else(|| meta.invalid(format!("GGUF metadata has no `{MERGES}` (BPE merges)")))?;
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let bad = |why: String| meta.invalid(format!("`{MERGES}[{i}]` {line:?} {why}"));
            // The separator is the first space after the first character, so that a left
            // part that is itself a space still parses (llama.cpp splits the same way).
            let split = line
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == ' ')
                .map(|(at, _)| at)
                .ok_or_else(|| bad("is not two tokens separated by a space".into()))?;
            let (left, right) = (&line[..split], &line[split + 1..]);
            for part in [left, right, &format!("{left}{right}")] {
                if !vocab.ids.contains_key(part) {
                    return Err(bad(format!("names {part:?}, which is not a token")));
                }
            }
            Ok((left.to_string(), right.to_string()))
        })
        .collect()
}
