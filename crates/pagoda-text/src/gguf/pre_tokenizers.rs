//! `tokenizer.ggml.pre`: llama.cpp's name for how a byte-level BPE model splits text into
//! words, as the pre-tokenizer (and normalizer) of the model's Hugging Face tokenizer.json.

use tokenizers::normalizers::{NormalizerWrapper, NFC};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::SplitDelimiterBehavior;

use super::vocab::Meta;
use crate::error::Result;

pub const KEY: &str = "tokenizer.ggml.pre";

/// The split regex of Llama 3's tokenizer.json.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's (Qwen2, 2.5 and 3): Llama 3's with single digits.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const LLAMA3_NAMES: [&str; 3] = ["llama-bpe", "llama3", "llama-v3"];

pub const SUPPORTED: &str = "default, gpt-2, llama-bpe (llama3), qwen2 and smollm";

pub struct PreTokenization {
    pub normalizer: Option<NormalizerWrapper>,
    pub pre_tokenizer: PreTokenizerWrapper,
    /// A word that is a token whole is taken as that token without merging (Llama 3).
    pub ignore_merges: bool,
}

/// The file's pre-tokenizer name. A file without the key predates it, and llama.cpp reads
/// that as "default".
pub fn name<'a>(meta: Meta<'a>) -> Result<&'a str> {
    Ok(meta.str(KEY)?.unwrap_or("default"))
}

/// `None` for a name Pagoda does not know.
pub fn for_name(name: &str) -> Option<PreTokenization> {
    let byte_level =
        |use_regex| PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, use_regex));
    let split_then_bytes = |regex: &str| {
        let split = Split::new(
            SplitPattern::Regex(regex.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .expect("the built-in regexes compile");
        PreTokenizerWrapper::Sequence(Sequence::new(vec![split.into(), byte_level(false)]))
    };
    Some(match name {
        // GPT-2's regex, inside the ByteLevel pre-tokenizer. llama.cpp's "default" is what old
        // conversions wrote when they did not know; GPT-2's split is the byte-level classic.
        "default" | "gpt-2" => PreTokenization {
            normalizer: None,
            pre_tokenizer: byte_level(true),
            ignore_merges: false,
        },
        _ if LLAMA3_NAMES.contains(&name) => PreTokenization {
            normalizer: None,
            pre_tokenizer: split_then_bytes(LLAMA3),
            ignore_merges: true,
        },
        // Qwen2's tokenizer.json normalizes to NFC first.
        "qwen2" => PreTokenization {
            normalizer: Some(NFC.into()),
            pre_tokenizer: split_then_bytes(QWEN2),
            ignore_merges: false,
        },
        // SmolLM: every digit on its own, then GPT-2's regex.
        "smollm" => PreTokenization {
            normalizer: None,
            pre_tokenizer: PreTokenizerWrapper::Sequence(Sequence::new(vec![
                Digits::new(true).into(),
                byte_level(true),
            ])),
            ignore_merges: false,
        },
        _ => return None,
    })
}

/// Llama 3 files from before `tokenizer.ggml.add_bos_token` existed still start with BOS
/// (llama.cpp's default for this pre-tokenizer).
pub fn adds_bos_by_default(name: &str) -> bool {
    LLAMA3_NAMES.contains(&name)
}
