//! The GGUF fixtures with metadata removed or retyped, and tensors dropped, retyped,
//! reshaped or filled.

use std::collections::BTreeMap;
use std::path::Path;

use pagoda_gguf::{gguf_bytes, GgufFile, MetaValue, TensorToWrite, TensorType};

use crate::{scratch_dir, Edit, Tally};

const FILES: [&str; 4] = [
    "tiny-qwen2-f16.gguf",
    "tiny-mistral-q8_0.gguf",
    "tiny-qwen3-q4_0.gguf",
    "tiny-qwen2-kquants.gguf",
];

#[derive(Clone)]
struct Gguf {
    metadata: BTreeMap<String, MetaValue>,
    tensors: Vec<TensorToWrite>,
}

fn fixture(file: &str) -> Gguf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/gguf")
        .join(file);
    let gguf = GgufFile::open(&path).unwrap();
    Gguf {
        metadata: gguf.metadata.clone(),
        tensors: gguf.tensors_to_write(),
    }
}

fn numbers() -> Vec<MetaValue> {
    vec![
        MetaValue::U32(0),
        MetaValue::U32(1),
        MetaValue::U32(3),
        MetaValue::U32(u32::MAX),
        MetaValue::U64(u64::MAX),
        MetaValue::I32(-1),
        MetaValue::F32(f32::NAN),
        MetaValue::F32(f32::INFINITY),
        MetaValue::F32(-1.0),
        MetaValue::F32(1e30),
        MetaValue::String("7".into()),
    ]
}

/// Every key: removed, and replaced by values of its own and other types.
fn metadata_edits(gguf: &Gguf) -> Vec<(String, Edit<Gguf>)> {
    let mut edits: Vec<(String, Edit<Gguf>)> = Vec::new();
    for (key, value) in &gguf.metadata {
        let k = key.clone();
        edits.push((
            format!("{key} removed"),
            Box::new(move |g| {
                g.metadata.remove(&k);
            }),
        ));
        let replacements = match value {
            MetaValue::String(_) => vec![
                MetaValue::String(String::new()),
                MetaValue::String("gpt2".into()),
                MetaValue::U32(7),
            ],
            MetaValue::Array(items) => {
                let first = items.first().cloned().unwrap_or(MetaValue::U32(0));
                let same = |v: MetaValue| MetaValue::Array(vec![v; items.len()]);
                let mut r = vec![
                    MetaValue::Array(Vec::new()),
                    MetaValue::Array(vec![first.clone()]),
                    same(first),
                    MetaValue::U32(1),
                ];
                r.extend(match items.first() {
                    Some(MetaValue::String(_)) => vec![
                        same(MetaValue::String(String::new())),
                        same(MetaValue::String("a b c".into())),
                        same(MetaValue::String("\u{fffd} \u{0}".into())),
                    ],
                    Some(_) => vec![
                        same(MetaValue::I32(-5)),
                        same(MetaValue::I32(i32::MAX)),
                        same(MetaValue::F32(f32::NAN)),
                    ],
                    None => vec![],
                });
                r
            }
            _ => numbers(),
        };
        for v in replacements {
            let k = key.clone();
            edits.push((
                format!("{key} = {v:?}"),
                Box::new(move |g| {
                    g.metadata.insert(k.clone(), v.clone());
                }),
            ));
        }
    }
    edits.push((
        "tokenizer.ggml.eos_token_id = vocab".into(),
        Box::new(|g| {
            let vocab = token_count(g);
            g.metadata
                .insert("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(vocab));
        }),
    ));
    edits.push((
        "tokenizer.ggml.bos_token_id = vocab".into(),
        Box::new(|g| {
            let vocab = token_count(g);
            g.metadata
                .insert("tokenizer.ggml.bos_token_id".into(), MetaValue::U32(vocab));
            g.metadata
                .insert("tokenizer.ggml.add_bos_token".into(), MetaValue::Bool(true));
        }),
    ));
    edits
}

fn token_count(g: &Gguf) -> u32 {
    match g.metadata.get("tokenizer.ggml.tokens") {
        Some(MetaValue::Array(items)) => items.len() as u32,
        _ => 0,
    }
}

/// `bytes` cut or zero-padded to what `dims` of type `id` take.
fn resized(mut bytes: Vec<u8>, dims: &[u64], id: u32) -> Vec<u8> {
    let values: u64 = dims.iter().product();
    let size = match TensorType::from_id(id).block() {
        Some((per_block, block_bytes)) => values as usize / per_block * block_bytes,
        None => bytes.len(),
    };
    bytes.resize(size, 0);
    bytes
}

/// The first layer's tensors and the others outside layers: dropped, retyped, reshaped and
/// filled with bytes that decode to NaN or huge scales.
fn tensor_edits(gguf: &Gguf) -> Vec<(String, Edit<Gguf>)> {
    let mut edits: Vec<(String, Edit<Gguf>)> = Vec::new();
    let retypes = [
        TensorType::F32,
        TensorType::F16,
        TensorType::BF16,
        TensorType::Q8_0,
        TensorType::Q4_0,
        TensorType::Q5_0,
        TensorType::Q4_1,
        TensorType::Q5_1,
        TensorType::Q4K,
        TensorType::Q6K,
        TensorType::Q2K,
        TensorType::IQ4XS,
        TensorType::IQ2XS,
        TensorType::IQ1M,
        TensorType::Other(99),
    ];
    for (i, t) in gguf.tensors.iter().enumerate() {
        if t.name.starts_with("blk.") && !t.name.starts_with("blk.0.") {
            continue;
        }
        let name = &t.name;
        edits.push((
            format!("{name} removed"),
            Box::new(move |g| {
                g.tensors.remove(i);
            }),
        ));
        for ty in retypes {
            if ty.id() == t.type_id {
                continue;
            }
            edits.push((
                format!("{name} as {ty}"),
                Box::new(move |g| {
                    let t = &mut g.tensors[i];
                    t.type_id = ty.id();
                    t.bytes = resized(std::mem::take(&mut t.bytes), &t.dims, t.type_id);
                }),
            ));
        }
        let mut shapes = vec![
            t.dims.iter().rev().copied().collect::<Vec<u64>>(),
            [&t.dims[..], &[1]].concat(),
            [&t.dims[..], &[2]].concat(),
            t.dims.iter().map(|&d| d / 2).collect(),
            t.dims.iter().map(|&d| d * 2).collect(),
            vec![0; t.dims.len()],
        ];
        if t.dims.len() == 2 {
            shapes.push(vec![t.dims[0]]);
        }
        for dims in shapes {
            edits.push((
                format!("{name} dims {dims:?}"),
                Box::new(move |g| {
                    let t = &mut g.tensors[i];
                    t.dims = dims.clone();
                    t.bytes = resized(std::mem::take(&mut t.bytes), &t.dims, t.type_id);
                }),
            ));
        }
        for fill in [0xFFu8, 0x7C, 0x00] {
            edits.push((
                format!("{name} bytes {fill:#04x}"),
                Box::new(move |g| {
                    g.tensors[i].bytes.fill(fill);
                }),
            ));
        }
    }
    edits
}

#[test]
fn broken_gguf_files_fail_to_load_or_serve_but_never_panic() {
    let dir = scratch_dir("gguf");
    let mut tally = Tally::start();
    for file in FILES {
        let base = fixture(file);
        let path = dir.join(file);
        let edits = metadata_edits(&base).into_iter().chain(tensor_edits(&base));
        tally.serve_each(file, &base, edits, |gguf| {
            std::fs::write(&path, gguf_bytes(&gguf.metadata, &gguf.tensors)).unwrap();
            path.clone()
        });
    }
    tally.check();
}
