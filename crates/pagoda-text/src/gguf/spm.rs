//! `tokenizer.ggml.model = "llama"`: a SentencePiece BPE vocabulary, as the BPE model with
//! byte fallback that transformers converts Llama's SentencePiece tokenizers into.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{NormalizerWrapper, Prepend, Replace, Sequence};

use super::special::GgufSpecialTokens;
use super::vocab::{Meta, Vocab};
use crate::error::Result;

/// SentencePiece's stand-in for a space.
const SPACE: &str = "\u{2581}";

pub fn build(
    meta: Meta<'_>,
    vocab: &Vocab<'_>,
    special: &GgufSpecialTokens,
) -> Result<tokenizers::Tokenizer> {
    let invalid = |e: tokenizers::Error| meta.invalid(format!("cannot build the BPE model: {e}"));
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab.model_vocab(), merges(vocab))
        .byte_fallback(true)
        .fuse_unk(true);
    // An empty text is no vocabulary entry, so it cannot stand for unknown text.
    if let Some(unk) = special.unk.as_ref().filter(|t| !t.text.is_empty()) {
        builder = builder.unk_token(unk.text.clone());
    }
    let model = builder.build().map_err(invalid)?;

    // SentencePiece marks the start of the text as a word start unless told not to.
    let prefix_space = meta
        .bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(true);
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    let mut decoders: Vec<DecoderWrapper> = Vec::new();
    if prefix_space {
        normalizers.push(Prepend::new(SPACE.into()).into());
    }
    normalizers.push(Replace::new(" ", SPACE).map_err(invalid)?.into());
    decoders.push(Replace::new(SPACE, " ").map_err(invalid)?.into());
    decoders.push(ByteFallback::new().into());
    decoders.push(Fuse::new().into());
    if prefix_space {
        decoders.push(Strip::new(' ', 1, 0).into());
    }

    let mut tokenizer = tokenizers::Tokenizer::new(model);
    tokenizer
        .with_normalizer(Some(Sequence::new(normalizers)))
        .with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tokenizer)
}

/// SentencePiece keeps no merges: each piece has a score, and llama.cpp joins the adjacent
/// pair whose joined text is the best-scoring piece. As BPE merges (transformers' converter):
/// every split of a piece into two pieces, ranked by the piece's score, best first; between
/// equal scores, longer left then longer right parts first, then in id order.
fn merges(vocab: &Vocab<'_>) -> Vec<(String, String)> {
    struct Candidate<'a> {
        left: &'a str,
        right: &'a str,
        score: f64,
        left_chars: usize,
        right_chars: usize,
    }
    let mut candidates = Vec::new();
    for (id, &piece) in vocab.tokens.iter().enumerate() {
        if piece.is_empty() {
            continue;
        }
        let chars = piece.chars().count();
        for (left_chars, (at, _)) in piece.char_indices().enumerate().skip(1) {
            let (left, right) = piece.split_at(at);
            if vocab.ids.contains_key(left) && vocab.ids.contains_key(right) {
                candidates.push(Candidate {
                    left,
                    right,
                    // -0.0 and 0.0 are one score.
                    score: vocab.scores[id] + 0.0,
                    left_chars,
                    right_chars: chars - left_chars,
                });
            }
        }
    }
    // Stable, so equal keys stay in piece-id order.
    candidates.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.left_chars.cmp(&a.left_chars))
            .then(b.right_chars.cmp(&a.right_chars))
    });
    candidates
        .into_iter()
        .map(|c| (c.left.to_string(), c.right.to_string()))
        .collect()
}
