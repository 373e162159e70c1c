//! The safetensors fixtures with `config.json` and `generation_config.json` fields removed or
//! replaced, and tensors dropped, retyped, reshaped or filled.

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::{scratch_dir, Edit, Tally};

const MODELS: [&str; 5] = [
    "tiny-llama",
    "tiny-llama-linear",
    "tiny-mistral",
    "tiny-qwen2",
    "tiny-qwen3",
];

#[derive(Clone)]
struct Tensor {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    bytes: Vec<u8>,
}

#[derive(Clone)]
struct Checkpoint {
    config: Map<String, Value>,
    generation: Map<String, Value>,
    tensors: Vec<Tensor>,
}

fn read_json(path: &Path) -> Map<String, Value> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The checkpoint in `dir`, its shards (if any) read into one list of tensors.
fn fixture(dir: &Path) -> Checkpoint {
    let mut tensors = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "safetensors") {
            tensors.extend(read_safetensors(&path));
        }
    }
    tensors.sort_by(|a: &Tensor, b| a.name.cmp(&b.name));
    Checkpoint {
        config: read_json(&dir.join("config.json")),
        generation: read_json(&dir.join("generation_config.json")),
        tensors,
    }
}

fn read_safetensors(path: &Path) -> Vec<Tensor> {
    let file = std::fs::read(path).unwrap();
    let header_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: Map<String, Value> = serde_json::from_slice(&file[8..8 + header_len]).unwrap();
    let data = &file[8 + header_len..];
    header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, t)| {
            let offsets: Vec<usize> = serde_json::from_value(t["data_offsets"].clone()).unwrap();
            Tensor {
                name: name.clone(),
                dtype: t["dtype"].as_str().unwrap().to_string(),
                shape: serde_json::from_value(t["shape"].clone()).unwrap(),
                bytes: data[offsets[0]..offsets[1]].to_vec(),
            }
        })
        .collect()
}

fn safetensors_bytes(tensors: &[Tensor]) -> Vec<u8> {
    let mut header = Map::new();
    let mut offset = 0;
    for t in tensors {
        let end = offset + t.bytes.len();
        header.insert(
            t.name.clone(),
            json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    for t in tensors {
        out.extend(&t.bytes);
    }
    out
}

fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(3),
        json!(-1),
        json!(4_294_967_296u64),
        json!(u64::MAX),
        json!(1e30),
        json!(0.5),
        Value::Null,
        json!("x"),
        json!([]),
        json!({}),
    ]
}

fn rope_scalings() -> Vec<Value> {
    let llama3 = |low: f64, high: f64, original: u64| {
        json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": low,
               "high_freq_factor": high, "original_max_position_embeddings": original})
    };
    vec![
        json!({"rope_type": "linear", "factor": 0.0}),
        json!({"rope_type": "linear", "factor": -2.0}),
        json!({"rope_type": "linear", "factor": 1e300}),
        json!({"type": "dynamic", "factor": 2.0}),
        json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}),
        json!({"rope_type": "longrope", "short_factor": [1.0], "long_factor": []}),
        json!({"rope_type": "unknown"}),
        llama3(1.0, 1.0, 64),
        llama3(4.0, 1.0, 64),
        llama3(1.0, 4.0, 0),
        llama3(0.0, 0.0, u64::MAX),
    ]
}

fn file_of(c: &mut Checkpoint, generation: bool) -> &mut Map<String, Value> {
    if generation {
        &mut c.generation
    } else {
        &mut c.config
    }
}

/// Every top-level field of both configs: removed, and replaced by numbers, nulls, strings and
/// containers; rope scaling by broken variants of each kind; the stop tokens out of range.
fn config_edits(checkpoint: &Checkpoint) -> Vec<(String, Edit<Checkpoint>)> {
    let mut edits: Vec<(String, Edit<Checkpoint>)> = Vec::new();
    let fields = |c: &Checkpoint, generation: bool| {
        let map = if generation { &c.generation } else { &c.config };
        map.keys().cloned().collect::<Vec<_>>()
    };
    for generation in [false, true] {
        let file = if generation {
            "generation_config"
        } else {
            "config"
        };
        for key in fields(checkpoint, generation) {
            let k = key.clone();
            edits.push((
                format!("{file}.{key} removed"),
                Box::new(move |c| {
                    file_of(c, generation).remove(&k);
                }),
            ));
            let mut replacements = values();
            if key.starts_with("rope_") {
                replacements.extend(rope_scalings());
            }
            if key == "eos_token_id" || key == "bos_token_id" {
                replacements.extend([json!([1024]), json!([-1]), json!(vec![2; 10_000])]);
            }
            for v in replacements {
                let k = key.clone();
                edits.push((
                    format!("{file}.{key} = {v}"),
                    Box::new(move |c| {
                        file_of(c, generation).insert(k.clone(), v.clone());
                    }),
                ));
            }
        }
    }
    edits
}

fn dtype_size(dtype: &str) -> usize {
    match dtype {
        "F64" | "I64" => 8,
        "F32" | "I32" => 4,
        "F16" | "BF16" => 2,
        _ => 1,
    }
}

fn resized(t: &mut Tensor) {
    let values: u64 = t.shape.iter().product();
    t.bytes.resize(values as usize * dtype_size(&t.dtype), 0);
}

/// The first layer's tensors and the others outside layers.
fn tensor_edits(checkpoint: &Checkpoint) -> Vec<(String, Edit<Checkpoint>)> {
    let mut edits: Vec<(String, Edit<Checkpoint>)> = Vec::new();
    for (i, t) in checkpoint.tensors.iter().enumerate() {
        if t.name.contains(".layers.") && !t.name.contains(".layers.0.") {
            continue;
        }
        let name = &t.name;
        edits.push((
            format!("{name} removed"),
            Box::new(move |c| {
                c.tensors.remove(i);
            }),
        ));
        for dtype in ["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3"] {
            if dtype == t.dtype {
                continue;
            }
            edits.push((
                format!("{name} as {dtype}"),
                Box::new(move |c| {
                    let t = &mut c.tensors[i];
                    t.dtype = dtype.to_string();
                    resized(t);
                }),
            ));
        }
        let shapes = [
            t.shape.iter().rev().copied().collect::<Vec<u64>>(),
            [&t.shape[..], &[1]].concat(),
            t.shape.iter().map(|&d| d / 2).collect(),
            t.shape.iter().map(|&d| d * 2).collect(),
            vec![0; t.shape.len()],
            vec![t.shape.iter().product()],
        ];
        for shape in shapes {
            edits.push((
                format!("{name} shape {shape:?}"),
                Box::new(move |c| {
                    let t = &mut c.tensors[i];
                    t.shape = shape.clone();
                    resized(t);
                }),
            ));
        }
        for fill in [0xFFu8, 0x7F] {
            edits.push((
                format!("{name} bytes {fill:#04x}"),
                Box::new(move |c| c.tensors[i].bytes.fill(fill)),
            ));
        }
    }
    edits
}

#[test]
fn broken_safetensors_checkpoints_fail_to_load_or_serve_but_never_panic() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models");
    let mut tally = Tally::start();
    for model in MODELS {
        let source = fixtures.join(model);
        let dir = scratch_dir(&format!("safetensors-{model}"));
        for file in ["tokenizer.json", "tokenizer_config.json"] {
            std::fs::copy(source.join(file), dir.join(file)).unwrap();
        }
        let base = fixture(&source);
        // The config fields are the same in every family: two of them (untied with llama3
        // rope, tied with biases) cover them; the tensors differ in each.
        let config = match model {
            "tiny-llama" | "tiny-qwen2" => config_edits(&base),
            _ => Vec::new(),
        };
        let edits = config.into_iter().chain(tensor_edits(&base));
        tally.serve_each(model, &base, edits, |c| {
            let write_json = |name: &str, map: &Map<String, Value>| {
                std::fs::write(dir.join(name), serde_json::to_vec(map).unwrap()).unwrap()
            };
            write_json("config.json", &c.config);
            write_json("generation_config.json", &c.generation);
            std::fs::write(dir.join("model.safetensors"), safetensors_bytes(&c.tensors)).unwrap();
            dir.clone()
        });
    }
    tally.check();
}
