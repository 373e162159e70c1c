//! The bytes each token stands for, as a constraint engine needs them to know which tokens
//! can continue a grammar. Byte-level BPE (GPT-2 style: Llama 3, Qwen, Mistral's newer
//! tokenizers) spells bytes with printable characters; SentencePiece-style vocabularies
//! (Llama 2, Mistral v1) write `▁` for a space and `<0xNN>` for raw bytes.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::{Result, TextError};
use crate::tokenizer::Tokenizer;

/// What one token id decodes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenText {
    /// Text bytes (possibly part of a UTF-8 character).
    Bytes(Vec<u8>),
    /// A special (control) token, spelled as in the vocabulary: never part of any text.
    Special(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    ByteLevel,
    /// `▁` (or the decoder's own replacement character) for a space, `<0xNN>` for bytes.
    ByteFallback(char),
}

impl Tokenizer {
    /// Every id below `vocab_size`'s text; `None` for ids the vocabulary lacks (padding rows of
    /// a model's output layer) and for tokens that spell no bytes.
    pub fn token_texts(&self) -> Result<Vec<Option<TokenText>>> {
        let inner = self.inner();
        let spelling = spelling(inner)?;
        let specials: HashMap<u32, bool> = inner
            .get_added_tokens_decoder()
            .into_iter()
            .map(|(id, added)| (id, added.special))
            .collect();
        let byte_of_char = byte_level_chars();
        let n = inner.get_vocab_size(true) as u32;
        let mut out = Vec::with_capacity(n as usize);
        for id in 0..n {
            let Some(piece) = inner.id_to_token(id) else {
                out.push(None);
                continue;
            };
            let text = match specials.get(&id) {
                Some(true) => Some(TokenText::Special(piece)),
                // A non-special added token is plain text, spelled as it reads.
                Some(false) => Some(TokenText::Bytes(piece.into_bytes())),
                None => match spelling {
                    Spelling::ByteLevel => piece
                        .chars()
                        .map(|c| byte_of_char.get(&c).copied())
                        .collect::<Option<Vec<u8>>>()
                        .map(TokenText::Bytes),
                    Spelling::ByteFallback(space) => Some(TokenText::Bytes(
                        hex_byte(&piece)
                            .map(|b| vec![b])
                            .unwrap_or_else(|| piece.replace(space, " ").into_bytes()),
                    )),
                },
            };
            out.push(text.filter(|t| !matches!(t, TokenText::Bytes(b) if b.is_empty())));
        }
        Ok(out)
    }
}

/// `<0xNN>`, a byte-fallback token.
fn hex_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// How the vocabulary spells bytes, read from the decoder (as JSON, so that any nesting of
/// decoder sequences is seen).
fn spelling(inner: &tokenizers::Tokenizer) -> Result<Spelling> {
    let decoder = inner
        .get_decoder()
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| TextError::Tokenize(e.to_string()))?
        .unwrap_or(Value::Null);
    let mut types = Vec::new();
    let mut space = '▁';
    collect_decoders(&decoder, &mut types, &mut space);
    if types.iter().any(|t| t == "ByteLevel") {
        Ok(Spelling::ByteLevel)
    } else if types
        .iter()
        .any(|t| t == "ByteFallback" || t == "Metaspace")
    {
        Ok(Spelling::ByteFallback(space))
    } else {
        Err(TextError::Tokenize(format!(
            "cannot tell how this tokenizer spells bytes (decoder {decoder})"
        )))
    }
}

fn collect_decoders(decoder: &Value, types: &mut Vec<String>, space: &mut char) {
    let Some(kind) = decoder.get("type").and_then(Value::as_str) else {
        return;
    };
    types.push(kind.to_string());
    match kind {
        "Sequence" => {
            for d in decoder
                .get("decoders")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_decoders(d, types, space);
            }
        }
        "Replace" if decoder.get("content").and_then(Value::as_str) == Some(" ") => {
            let pattern = decoder.pointer("/pattern/String").and_then(Value::as_str);
            let mut chars = pattern.unwrap_or_default().chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                *space = c;
            }
        }
        "Metaspace" => {
            if let Some(c) = decoder
                .get("replacement")
                .and_then(Value::as_str)
                .and_then(|s| s.chars().next())
            {
                *space = c;
            }
        }
        _ => {}
    }
}

/// GPT-2's byte-to-character table, inverted: printable Latin-1 bytes stand for themselves,
/// the other 68 bytes are shifted to U+0100 and up in byte order.
fn byte_level_chars() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut next = 0x100u32;
    (0..=255u8)
        .map(|b| {
            let c = if printable(b) {
                char::from(b)
            } else {
                let c = char::from_u32(next).unwrap_or('\u{FFFD}');
                next += 1;
                c
            };
            (c, b)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(path: &str) -> Tokenizer {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
        Tokenizer::from_file(&root.join(path)).unwrap()
    }

    /// Each token's bytes, decoded together, give what the tokenizer itself decodes.
    fn check_round_trip(tok: &Tokenizer, text: &str) {
        let texts = tok.token_texts().unwrap();
        let ids = tok.encode(text, false).unwrap();
        let mut bytes = Vec::new();
        for id in &ids {
            match &texts[*id as usize] {
                Some(TokenText::Bytes(b)) => bytes.extend_from_slice(b),
                other => panic!("token {id} of {text:?} spells {other:?}"),
            }
        }
        let decoded = tok.decode(&ids, false).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap().trim_start(),
            decoded.trim_start()
        );
    }

    #[test]
    fn byte_level_tokens_spell_their_bytes() {
        let tok = fixture("models/tiny-qwen2/tokenizer.json");
        check_round_trip(&tok, "{\"a\": [1, 2.5e3]}\n\tnaïve 東京 ✓");
        let texts = tok.token_texts().unwrap();
        let eos = tok.token_to_id("<|endoftext|>").unwrap();
        assert_eq!(
            texts[eos as usize],
            Some(TokenText::Special("<|endoftext|>".into()))
        );
        // Every single byte is some token's whole spelling.
        for b in 0..=255u8 {
            assert!(texts.contains(&Some(TokenText::Bytes(vec![b]))), "byte {b}");
        }
    }

    #[test]
    fn sentencepiece_tokens_spell_spaces_and_fallback_bytes() {
        let tok = fixture("gguf-tokenizers/spm/tokenizer.json");
        check_round_trip(&tok, "Hello world, {\"k\": 1} ünï");
        assert_eq!(hex_byte("<0x0A>"), Some(b'\n'));
        assert_eq!(hex_byte("<0x0A0>"), None);
    }
}
