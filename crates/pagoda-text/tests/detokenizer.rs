use std::path::PathBuf;

use pagoda_text::{IncrementalDetokenizer, Tokenizer};

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
