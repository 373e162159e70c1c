use std::path::PathBuf;

use pagoda_text::{IncrementalDetokenizer, Tokenizer, MAX_HELD_TOKENS};

fn tokenizer() -> Tokenizer {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tiny-qwen2");
    Tokenizer::from_file(&dir.join("tokenizer.json")).unwrap()
}

#[test]
fn streamed_deltas_concatenate_to_the_full_decode_and_are_valid_utf8() {
    let tok = tokenizer();
    let texts = [
        "Hello, world! The pagoda stands.",
        "naïve café — 東京タワー 🚀 emoji",
        "  spaces\tand\nnewlines  ",
    ];
    for text in texts {
        let ids = tok.encode(text, false).unwrap();
        let mut detok = IncrementalDetokenizer::new(&[], false);
        let mut out = String::new();
        for id in &ids {
            let delta = detok.push(&tok, &[*id]).unwrap();
            assert!(
                !delta.contains('\u{FFFD}'),
                "{text:?}: broken UTF-8 in {delta:?}"
            );
            out.push_str(&delta);
        }
        out.push_str(&detok.flush(&tok).unwrap());
        assert_eq!(out, tok.decode(&ids, false).unwrap());
        assert_eq!(out, text);
    }
}

#[test]
fn output_after_a_prompt_decodes_as_in_the_full_sequence() {
    let tok = tokenizer();
    let prompt = tok.encode("The old pagoda", false).unwrap();
    let output = tok.encode(" stood at the top of the hill", false).unwrap();
    let mut detok = IncrementalDetokenizer::new(&prompt, false);
    let mut text = String::new();
    for id in &output {
        text.push_str(&detok.push(&tok, &[*id]).unwrap());
    }
    text.push_str(&detok.flush(&tok).unwrap());
    let all: Vec<u32> = prompt.iter().chain(&output).copied().collect();
    let full = tok.decode(&all, false).unwrap();
    assert_eq!(
        format!("{}{}", tok.decode(&prompt, false).unwrap(), text),
        full
    );
}

/// A token that is one UTF-8 continuation byte: alone it decodes to U+FFFD, and so does any
/// run of it, so a decoder waiting for the character to complete would wait forever.
fn continuation_byte_token(tok: &Tokenizer) -> u32 {
    (0..tok.vocab_size() as u32)
        .find(|&id| {
            tok.decode(&[id], false).unwrap() == "\u{FFFD}"
                && tok.decode(&[id, id, id, id], false).unwrap() == "\u{FFFD}".repeat(4)
        })
        .expect("a byte-level vocabulary has lone continuation bytes")
}

#[test]
fn stray_continuation_bytes_are_emitted_lossily_after_a_bounded_wait() {
    let tok = tokenizer();
    let stray = continuation_byte_token(&tok);
    let mut detok = IncrementalDetokenizer::new(&[], false);
    let mut out = String::new();
    let mut longest_wait = 0;
    for _ in 0..1000 {
        out.push_str(&detok.push(&tok, &[stray]).unwrap());
        assert!(detok.num_held() < MAX_HELD_TOKENS, "{}", detok.num_held());
        longest_wait = longest_wait.max(detok.num_held());
    }
    assert_eq!(longest_wait, MAX_HELD_TOKENS - 1);
    assert!(out.chars().count() >= 1000 - MAX_HELD_TOKENS);
    out.push_str(&detok.flush(&tok).unwrap());
    assert_eq!(out, "\u{FFFD}".repeat(1000));
}

#[test]
fn text_after_stray_bytes_decodes_normally_again() {
    let tok = tokenizer();
    let stray = continuation_byte_token(&tok);
    let text = " and then the monks rang the bell 🚀";
    let mut detok = IncrementalDetokenizer::new(&[], false);
    let mut out = String::new();
    for _ in 0..20 {
        out.push_str(&detok.push(&tok, &[stray]).unwrap());
    }
    for id in tok.encode(text, false).unwrap() {
        let delta = detok.push(&tok, &[id]).unwrap();
        out.push_str(&delta);
    }
    out.push_str(&detok.flush(&tok).unwrap());
    assert_eq!(out, format!("{}{text}", "\u{FFFD}".repeat(20)));
}

#[test]
fn a_character_split_over_several_tokens_is_still_held_until_complete() {
    let tok = tokenizer();
    // Each byte of a 4-byte character as its own token, then a space.
    let emoji = "🚀";
    let byte_ids: Vec<u32> = tok
        .encode(emoji, false)
        .unwrap()
        .into_iter()
        .flat_map(|id| {
            let piece = tok.decode(&[id], false).unwrap();
            // Already single bytes when the piece is not a whole character.
            if piece == emoji {
                Vec::new()
            } else {
                vec![id]
            }
        })
        .collect();
    assert!(
        byte_ids.len() >= 2,
        "the fixture splits {emoji} into byte tokens"
    );
    let mut detok = IncrementalDetokenizer::new(&[], false);
    for (i, id) in byte_ids.iter().enumerate() {
        let delta = detok.push(&tok, &[*id]).unwrap();
        if i + 1 < byte_ids.len() {
            assert_eq!(delta, "", "held until the character completes");
        } else {
            assert_eq!(delta, emoji);
        }
    }
}
