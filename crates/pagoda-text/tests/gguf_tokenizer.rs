//! Tokenizers and chat templates read from GGUF metadata, against the Hugging Face originals.
//!
//! Each directory under `testdata/gguf-tokenizers/` (written by
//! `scripts/make_gguf_tokenizer_fixtures.py`) holds a tokenizer-only `tokenizer.gguf` and the
//! `tokenizer.json` it was converted from. Pagoda's tokenizer built from the GGUF must encode
//! and decode exactly as the `tokenizers` crate loading that tokenizer.json does. Broken
//! metadata is made here by rewriting a fixture's keys into a new file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pagoda_gguf::{GgufFile, MetaValue};
use pagoda_text::chat_template::{ChatMessage, ChatTemplate, MessageContent, RenderOptions};
use pagoda_text::gguf::{special_tokens, GgufSpecialTokens, SpecialToken};
use pagoda_text::{TextError, Tokenizer};

const FIXTURES: &[&str] = &["tiny-qwen2", "smollm", "llama3", "qwen2", "spm"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture_dir(name: &str) -> PathBuf {
    root().join("testdata/gguf-tokenizers").join(name)
}

fn open(name: &str) -> GgufFile {
    GgufFile::open(&fixture_dir(name).join("tokenizer.gguf")).unwrap()
}

fn reference(name: &str) -> tokenizers::Tokenizer {
    tokenizers::Tokenizer::from_file(fixture_dir(name).join("tokenizer.json")).unwrap()
}

/// Texts that exercise pre-tokenizer regexes, normalizers, byte fallback and added tokens.
fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        " ",
        "   ",
        "\n",
        "\n\n\n",
        "\t",
        "Hello, world!",
        "Hello world",
        " Hello world",
        "  Hello   world  ",
        "hello\tworld\r\nnext line\n\n  indented",
        "北京是中华人民共和国的首都，也是全国的政治、文化中心。",
        "東京は日本の首都です。ひらがな、カタカナ、漢字、ｶﾀｶﾅ。",
        "서울은 대한민국의 수도입니다.",
        "Привет, как дела? Ελληνικά. مرحبا بالعالم. नमस्ते दुनिया।",
        "Emoji: 😀🎉 👍🏽 👨‍👩‍👧 🇯🇵 ❤️ ✨🚀",
        "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ 𓀀 \u{10FFFF} \u{0} \u{7f}",
        "Composed é and decomposed e\u{301}; Å vs A\u{30a}; ﬁ ligature; Ｆｕｌｌ width",
        "Numbers: 0 1 12 123 1234 12345 123456 3.14159 -42 1,000,000 1e-9 0x1F ٣٤٥ ²³",
        "2026-01-15T10:30:05Z and 10:30 and v1.2.3",
        "I'm sure you're right, they've said we'll go; it's HE'S and DON'T",
        "def f(x):\n\tif x > 1:\n\t\treturn x ** 2  # square\n    return None\n",
        "fn main() {\n    let v: Vec<u32> = (0..10).map(|i| i * 2).collect();\n}\n",
        "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
        "<|im_end|><|im_end|>  <|endoftext|>text<|im_start|>",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
        "<|python_tag|>call()<|eom_id|> <tool_call>{\"a\": 1}",
        "<think>\nreasoning\n</think>\n\nanswer",
        "<s>[INST] Hi </s><s> <unk> <tool>x</tool> </tool>",
        "<|im_start",
        "im_end|>",
        "< s >",
        "<0x41>",
        "▁▁ leading marker ▁",
        "a▁b",
        "trailing spaces   ",
        // Tokens of the llama3 fixture that no merge leads to (only Llama 3's ignore_merges
        // finds them whole).
        "the Pagoda GGUF tokenizer, Pagoda's GGUF",
        "mixed 中文English日本語123abc😀",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Longer real text: this crate's sources and the fixture script.
    texts.push(include_str!("../src/gguf/spm.rs").to_string());
    texts.push(include_str!("../src/chat_template/mod.rs").to_string());
    texts.push(include_str!("../../../scripts/make_gguf_tokenizer_fixtures.py").to_string());
    texts
}

fn assert_same_tokenization(name: &str, ours: &Tokenizer, theirs: &tokenizers::Tokenizer) {
    for text in corpus() {
        for add_special in [false, true] {
            let expected = theirs.encode(text.as_str(), add_special).unwrap();
            let expected = expected.get_ids();
            let got = ours.encode(&text, add_special).unwrap();
            assert_eq!(
                got, expected,
                "{name}: encode({text:?}, add_special_tokens={add_special})"
            );
            for skip in [false, true] {
                assert_eq!(
                    ours.decode(&got, skip).unwrap(),
                    theirs.decode(expected, skip).unwrap(),
                    "{name}: decode of {text:?}, skip_special_tokens={skip}"
                );
            }
        }
    }
}

#[test]
fn gguf_tokenizers_encode_and_decode_as_their_tokenizer_json() {
    for name in FIXTURES {
        let ours = Tokenizer::from_gguf(&open(name)).unwrap();
        let theirs = reference(name);
        assert_same_tokenization(name, &ours, &theirs);
    }
}

#[test]
fn gguf_vocabularies_match_ids_and_decode_any_id_sequence_alike() {
    for name in FIXTURES {
        let ours = Tokenizer::from_gguf(&open(name)).unwrap();
        let theirs = reference(name);
        let size = theirs.get_vocab_size(true);
        assert_eq!(ours.vocab_size(), size, "{name}: vocab size");
        for id in 0..size as u32 {
            let token = theirs.id_to_token(id);
            assert_eq!(ours.id_to_token(id), token, "{name}: token {id}");
            let token = token.unwrap();
            assert_eq!(
                ours.token_to_id(&token),
                Some(id),
                "{name}: id of {token:?}"
            );
        }
        // Windows of ids that no encoder would produce: partial UTF-8 byte tokens,
        // special tokens mid-word, pieces starting with the SentencePiece space.
        let ids: Vec<u32> = (0..size as u32).collect();
        for window in ids.windows(5).step_by(3) {
            for skip in [false, true] {
                assert_eq!(
                    ours.decode(window, skip).unwrap(),
                    theirs.decode(window, skip).unwrap(),
                    "{name}: decode({window:?}, skip_special_tokens={skip})"
                );
            }
        }
    }
}

#[test]
fn bos_is_added_where_the_gguf_says() {
    let cases = [
        ("tiny-qwen2", None),
        ("llama3", Some(1500)),
        ("spm", Some(1)),
    ];
    for (name, bos) in cases {
        let tokenizer = Tokenizer::from_gguf(&open(name)).unwrap();
        let ids = tokenizer.encode("Hello", true).unwrap();
        let plain = tokenizer.encode("Hello", false).unwrap();
        match bos {
            Some(bos) => assert_eq!(ids, [&[bos][..], &plain].concat(), "{name}"),
            None => assert_eq!(ids, plain, "{name}"),
        }
    }
}

fn token(id: u32, text: &str) -> Option<SpecialToken> {
    Some(SpecialToken {
        id,
        text: text.to_string(),
    })
}

#[test]
fn special_tokens_and_stop_ids() {
    let llama3 = special_tokens(&open("llama3")).unwrap();
    assert_eq!(
        llama3,
        GgufSpecialTokens {
            bos: token(1500, "<|begin_of_text|>"),
            eos: token(1501, "<|end_of_text|>"),
            eot: token(1508, "<|eot_id|>"),
            eom: token(1507, "<|eom_id|>"),
            unk: None,
            add_bos: true,
            add_eos: false,
        }
    );
    assert_eq!(llama3.stop_ids(), [1501, 1508, 1507]);

    let qwen = special_tokens(&open("tiny-qwen2")).unwrap();
    assert_eq!(qwen.bos, None);
    assert_eq!(qwen.eos, token(2, "<|im_end|>"));
    assert_eq!(qwen.stop_ids(), [2]);
    assert!(!qwen.add_bos);

    let spm = special_tokens(&open("spm")).unwrap();
    assert_eq!(spm.bos, token(1, "<s>"));
    assert_eq!(spm.eos, token(2, "</s>"));
    assert_eq!(spm.unk, token(0, "<unk>"));
    assert!(spm.add_bos && !spm.add_eos);
}

fn conversations() -> Vec<(Vec<ChatMessage>, RenderOptions)> {
    let generation = RenderOptions {
        add_generation_prompt: true,
        ..RenderOptions::default()
    };
    vec![
        (
            vec![ChatMessage::text("user", "Hello!")],
            generation.clone(),
        ),
        (
            vec![
                ChatMessage::text("system", "You are terse."),
                ChatMessage::text("user", "2+2?"),
                ChatMessage::text("assistant", "4"),
                ChatMessage::text("user", "And 3+3? 北京 😀"),
            ],
            generation,
        ),
        (
            vec![
                ChatMessage::text("user", "Hi"),
                ChatMessage::text("assistant", "Hello."),
            ],
            RenderOptions::default(),
        ),
    ]
}

#[test]
fn gguf_chat_templates_render_as_the_model_directory_templates() {
    let cases = [
        ("tiny-qwen2", root().join("testdata/models/tiny-qwen2")),
        ("tiny-qwen2", fixture_dir("tiny-qwen2")),
        ("llama3", fixture_dir("llama3")),
        ("qwen2", fixture_dir("qwen2")),
    ];
    const NOW: i64 = 1_768_469_405;
    for (name, dir) in cases {
        let ours = ChatTemplate::from_gguf(&open(name))
            .unwrap()
            .expect("the fixture has a chat template")
            .with_fixed_now(NOW);
        let theirs = ChatTemplate::from_model_dir(&dir)
            .unwrap()
            .unwrap()
            .with_fixed_now(NOW);
        assert_eq!(ours.source(), theirs.source(), "{name}");
        for (messages, options) in conversations() {
            let rendered = ours.render(&messages, &options).unwrap();
            assert_eq!(
                rendered,
                theirs.render(&messages, &options).unwrap(),
                "{name}"
            );
            let last = match &messages.last().unwrap().content {
                Some(MessageContent::Text(text)) => text,
                _ => unreachable!(),
            };
            assert!(rendered.contains(last.as_str()), "{name}: {rendered:?}");
        }
    }
    // The Llama 3.1 template opens with bos_token, which must come from the GGUF vocabulary.
    let llama3 = ChatTemplate::from_gguf(&open("llama3")).unwrap().unwrap();
    let (messages, options) = &conversations()[0];
    let rendered = llama3.render(messages, options).unwrap();
    assert!(rendered.starts_with("<|begin_of_text|><|start_header_id|>system"));
    assert!(ChatTemplate::from_gguf(&open("spm")).unwrap().is_none());
}

// ---- broken metadata ----

/// A copy of fixture `name` with its metadata changed by `edit`, written as `case`.
fn rewritten(
    name: &str,
    case: &str,
    edit: impl FnOnce(&mut BTreeMap<String, MetaValue>),
) -> GgufFile {
    let mut metadata = open(name).metadata;
    edit(&mut metadata);
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gguf-tokenizer-{case}.gguf"));
    std::fs::write(&path, pagoda_gguf::gguf_bytes(&metadata, &[])).unwrap();
    GgufFile::open(&path).unwrap()
}

type Edit = Box<dyn FnOnce(&mut BTreeMap<String, MetaValue>)>;

fn set(key: &str, v: MetaValue) -> impl FnOnce(&mut BTreeMap<String, MetaValue>) + '_ {
    move |m| {
        m.insert(key.to_string(), v);
    }
}

fn text(s: &str) -> MetaValue {
    MetaValue::String(s.to_string())
}

fn array_of(m: &mut BTreeMap<String, MetaValue>, key: &str) -> Vec<MetaValue> {
    match m.get(key) {
        Some(MetaValue::Array(items)) => items.clone(),
        _ => panic!("fixture lacks {key}"),
    }
}

/// The tokenizer error of `file`, which must name the file and contain `expected`.
fn tokenizer_error(file: &GgufFile, expected: &str) {
    let err = match Tokenizer::from_gguf(file) {
        Ok(_) => panic!(
            "{}: expected an error containing {expected:?}",
            file.path.display()
        ),
        Err(err) => err,
    };
    assert!(matches!(err, TextError::Gguf { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    assert!(
        message.contains(&file.path.display().to_string()),
        "{message}"
    );
    assert!(!message.contains('\n'), "one line: {message:?}");
}

#[test]
fn the_rewriter_round_trips_a_fixture() {
    let file = rewritten("llama3", "identity", |_| {});
    assert_same_tokenization(
        "llama3 rewritten",
        &Tokenizer::from_gguf(&file).unwrap(),
        &reference("llama3"),
    );
}

#[test]
fn unsupported_tokenizer_models_and_pre_tokenizers_are_named() {
    let bert = rewritten(
        "tiny-qwen2",
        "bert",
        set("tokenizer.ggml.model", text("bert")),
    );
    tokenizer_error(
        &bert,
        "GGUF tokenizer model `bert` is not supported: Pagoda reads gpt2 (BPE) and llama (SentencePiece)",
    );
    assert!(special_tokens(&bert).is_err());
    let pre = rewritten(
        "tiny-qwen2",
        "pre",
        set("tokenizer.ggml.pre", text("falcon")),
    );
    tokenizer_error(
        &pre,
        "GGUF pre-tokenizer `falcon` (tokenizer.ggml.pre) is not supported",
    );
    let no_model = rewritten("tiny-qwen2", "no-model", |m| {
        m.remove("tokenizer.ggml.model");
    });
    tokenizer_error(&no_model, "no `tokenizer.ggml.model`");
    let not_text = rewritten(
        "tiny-qwen2",
        "model-int",
        set("tokenizer.ggml.model", MetaValue::U32(2)),
    );
    tokenizer_error(&not_text, "`tokenizer.ggml.model` is not a string");
}

#[test]
fn a_missing_or_default_pre_tokenizer_is_gpt2s() {
    for (case, edit) in [("pre-absent", None), ("pre-default", Some(text("default")))] {
        let file = rewritten("tiny-qwen2", case, |m| match edit {
            None => {
                m.remove("tokenizer.ggml.pre");
            }
            Some(v) => {
                m.insert("tokenizer.ggml.pre".into(), v);
            }
        });
        assert_same_tokenization(
            case,
            &Tokenizer::from_gguf(&file).unwrap(),
            &reference("tiny-qwen2"),
        );
    }
}

#[test]
fn a_pre_tokenizer_name_changes_the_split() {
    // The tiny-qwen2 vocabulary read with SmolLM's split must tokenize as the smollm fixture,
    // and differently from its own GPT-2 split on multi-digit numbers.
    let file = rewritten(
        "tiny-qwen2",
        "as-smollm",
        set("tokenizer.ggml.pre", text("smollm")),
    );
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    assert_same_tokenization("tiny-qwen2 as smollm", &tokenizer, &reference("smollm"));
    let gpt2 = Tokenizer::from_gguf(&open("tiny-qwen2")).unwrap();
    assert_ne!(
        tokenizer.encode("12345", false).unwrap(),
        gpt2.encode("12345", false).unwrap()
    );
}

#[test]
fn qwen2_splits_every_digit_where_llama3_keeps_up_to_three() {
    // The llama3 vocabulary has multi-digit tokens, which Qwen2's split never reaches.
    let digits = |pre: &str| {
        let file = rewritten(
            "llama3",
            &format!("as-{pre}"),
            set("tokenizer.ggml.pre", text(pre)),
        );
        let tokenizer = Tokenizer::from_gguf(&file).unwrap();
        let ids = tokenizer.encode("2026 12345", false).unwrap();
        ids.iter()
            .map(|&id| tokenizer.decode(&[id], false).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        digits("qwen2"),
        ["2", "0", "2", "6", " ", "1", "2", "3", "4", "5"]
    );
    let llama = digits("llama-bpe");
    assert!(llama.iter().any(|t| t.len() > 1), "{llama:?}");
    assert!(
        llama.iter().all(|t| t.trim().chars().count() <= 3),
        "{llama:?}"
    );
}

#[test]
fn llama3_and_sentencepiece_add_bos_by_default() {
    for (name, bos) in [("llama3", 1500), ("spm", 1)] {
        let file = rewritten(name, &format!("{name}-no-add-bos"), |m| {
            m.remove("tokenizer.ggml.add_bos_token");
        });
        let ids = Tokenizer::from_gguf(&file)
            .unwrap()
            .encode("Hi", true)
            .unwrap();
        assert_eq!(ids.first(), Some(&bos), "{name}");
        assert!(special_tokens(&file).unwrap().add_bos);
    }
    let file = rewritten("tiny-qwen2", "qwen-no-add-bos", |m| {
        m.remove("tokenizer.ggml.add_bos_token");
    });
    assert!(!special_tokens(&file).unwrap().add_bos);
}

#[test]
fn add_eos_appends_eos() {
    let file = rewritten(
        "spm",
        "add-eos",
        set("tokenizer.ggml.add_eos_token", MetaValue::Bool(true)),
    );
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    let plain = reference("spm")
        .encode("Hello world", false)
        .unwrap()
        .get_ids()
        .to_vec();
    let expected = [&[1][..], &plain, &[2]].concat();
    assert_eq!(tokenizer.encode("Hello world", true).unwrap(), expected);
    assert_eq!(tokenizer.encode("Hello world", false).unwrap(), plain);
}

#[test]
fn inconsistent_metadata_is_an_error_not_a_panic() {
    let n_qwen = 1024u32;
    let cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "tiny-qwen2",
            "types-short",
            Box::new(|m| {
                let mut types = array_of(m, "tokenizer.ggml.token_type");
                types.pop();
                m.insert("tokenizer.ggml.token_type".into(), MetaValue::Array(types));
            }),
            "`tokenizer.ggml.token_type` has 1023 entries for 1024 tokens",
        ),
        (
            "tiny-qwen2",
            "tokens-short",
            Box::new(|m| {
                let mut tokens = array_of(m, "tokenizer.ggml.tokens");
                tokens.truncate(500);
                m.insert("tokenizer.ggml.tokens".into(), MetaValue::Array(tokens));
            }),
            "has 1024 entries for 500 tokens",
        ),
        (
            "tiny-qwen2",
            "no-tokens",
            Box::new(|m| {
                m.remove("tokenizer.ggml.tokens");
            }),
            "no `tokenizer.ggml.tokens`",
        ),
        (
            "tiny-qwen2",
            "empty-tokens",
            Box::new(set("tokenizer.ggml.tokens", MetaValue::Array(vec![]))),
            "no `tokenizer.ggml.tokens`",
        ),
        (
            "tiny-qwen2",
            "tokens-not-strings",
            Box::new(set("tokenizer.ggml.tokens", MetaValue::Array(vec![MetaValue::I32(1); 1024]))),
            "`tokenizer.ggml.tokens` is not an array of strings",
        ),
        (
            "tiny-qwen2",
            "duplicate-token",
            Box::new(|m| {
                let mut tokens = array_of(m, "tokenizer.ggml.tokens");
                tokens[700] = tokens[600].clone();
                m.insert("tokenizer.ggml.tokens".into(), MetaValue::Array(tokens));
            }),
            "twice, at ids 600 and 700",
        ),
        (
            "tiny-qwen2",
            "bad-type",
            Box::new(|m| {
                let mut types = array_of(m, "tokenizer.ggml.token_type");
                types[5] = MetaValue::I32(9);
                m.insert("tokenizer.ggml.token_type".into(), MetaValue::Array(types));
            }),
            "`tokenizer.ggml.token_type[5]` is not a token type",
        ),
        (
            "tiny-qwen2",
            "eos-out-of-range",
            Box::new(set("tokenizer.ggml.eos_token_id", MetaValue::U32(n_qwen))),
            "`tokenizer.ggml.eos_token_id` is 1024, out of range for 1024 tokens",
        ),
        (
            "tiny-qwen2",
            "bos-negative",
            Box::new(set("tokenizer.ggml.bos_token_id", MetaValue::I32(-1))),
            "`tokenizer.ggml.bos_token_id` is not a token id",
        ),
        (
            "tiny-qwen2",
            "add-bos-without-bos",
            Box::new(set("tokenizer.ggml.add_bos_token", MetaValue::Bool(true))),
            "names no BOS token",
        ),
        (
            "tiny-qwen2",
            "add-bos-not-bool",
            Box::new(set("tokenizer.ggml.add_bos_token", MetaValue::U8(1))),
            "`tokenizer.ggml.add_bos_token` is not a boolean",
        ),
        (
            "tiny-qwen2",
            "merge-unknown-token",
            Box::new(|m| {
                let mut merges = array_of(m, "tokenizer.ggml.merges");
                merges[3] = text("Ġ nosuchtoken");
                m.insert("tokenizer.ggml.merges".into(), MetaValue::Array(merges));
            }),
            "`tokenizer.ggml.merges[3]` \"Ġ nosuchtoken\" names \"nosuchtoken\", which is not a token",
        ),
        (
            "tiny-qwen2",
            "merge-unknown-result",
            Box::new(|m| {
                let mut merges = array_of(m, "tokenizer.ggml.merges");
                merges[3] = text("<|im_end|> <|im_end|>");
                m.insert("tokenizer.ggml.merges".into(), MetaValue::Array(merges));
            }),
            "names \"<|im_end|><|im_end|>\", which is not a token",
        ),
        (
            "tiny-qwen2",
            "merge-one-part",
            Box::new(|m| {
                let mut merges = array_of(m, "tokenizer.ggml.merges");
                merges[0] = text("北");
                m.insert("tokenizer.ggml.merges".into(), MetaValue::Array(merges));
            }),
            "is not two tokens separated by a space",
        ),
        (
            "tiny-qwen2",
            "no-merges",
            Box::new(|m| {
                m.remove("tokenizer.ggml.merges");
            }),
            "no `tokenizer.ggml.merges`",
        ),
        (
            "spm",
            "scores-short",
            Box::new(|m| {
                let mut scores = array_of(m, "tokenizer.ggml.scores");
                scores.truncate(10);
                m.insert("tokenizer.ggml.scores".into(), MetaValue::Array(scores));
            }),
            "`tokenizer.ggml.scores` has 10 entries for 1200 tokens",
        ),
        (
            "spm",
            "score-nan",
            Box::new(|m| {
                let mut scores = array_of(m, "tokenizer.ggml.scores");
                scores[7] = MetaValue::F32(f32::NAN);
                m.insert("tokenizer.ggml.scores".into(), MetaValue::Array(scores));
            }),
            "`tokenizer.ggml.scores[7]` is not a number",
        ),
        (
            "spm",
            "unk-out-of-range",
            Box::new(set("tokenizer.ggml.unknown_token_id", MetaValue::U64(u64::MAX))),
            "out of range for 1200 tokens",
        ),
        (
            "spm",
            "space-prefix-not-bool",
            Box::new(set("tokenizer.ggml.add_space_prefix", text("yes"))),
            "`tokenizer.ggml.add_space_prefix` is not a boolean",
        ),
    ];
    for (fixture, case, edit, expected) in cases {
        let file = rewritten(fixture, case, edit);
        tokenizer_error(&file, expected);
    }
}

#[test]
fn an_empty_token_is_a_hole_not_an_error() {
    // llama.cpp warns about empty token texts and goes on; no text encodes to them.
    let file = rewritten("tiny-qwen2", "empty-token", |m| {
        let mut tokens = array_of(m, "tokenizer.ggml.tokens");
        tokens[0] = text("");
        m.insert("tokenizer.ggml.tokens".into(), MetaValue::Array(tokens));
    });
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    assert_eq!(tokenizer.id_to_token(0), None);
    assert_eq!(tokenizer.decode(&[0, 1], false).unwrap(), "<|im_start|>");
    let reference = reference("tiny-qwen2");
    let text = "<|im_start|>user\nHi<|im_end|>";
    assert_eq!(
        tokenizer.encode(text, true).unwrap(),
        reference.encode(text, true).unwrap().get_ids()
    );
}

#[test]
fn a_bad_chat_template_is_an_error() {
    let not_text = rewritten(
        "tiny-qwen2",
        "template-int",
        set("tokenizer.chat_template", MetaValue::U32(1)),
    );
    let err = ChatTemplate::from_gguf(&not_text).unwrap_err().to_string();
    assert!(
        err.contains("`tokenizer.chat_template` is not a string"),
        "{err}"
    );
    let broken = rewritten(
        "tiny-qwen2",
        "template-syntax",
        set("tokenizer.chat_template", text("{% for %}")),
    );
    let err = ChatTemplate::from_gguf(&broken).unwrap_err().to_string();
    assert!(err.contains("template-syntax.gguf"), "{err}");
}

#[test]
fn a_truncated_file_is_an_error() {
    let bytes = std::fs::read(fixture_dir("llama3").join("tokenizer.gguf")).unwrap();
    // The writer pads the end to 32 bytes; cut inside the metadata.
    for cut in [3, 24, 100, bytes.len() / 2, bytes.len() - 64] {
        let path =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gguf-tokenizer-cut-{cut}.gguf"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert!(GgufFile::open(&path).is_err(), "cut at {cut}");
    }
}
