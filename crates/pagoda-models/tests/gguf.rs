//! GGUF checkpoints (scripts/make_gguf_fixtures.py): every tensor type decodes bit for bit as
//! the `gguf` package decodes it, and models converted from the tiny checkpoints (f16, Q8_0,
//! Q4_0 and a Q4_K/Q5_K/Q6_K mix) compute what transformers computes on the decoded weights.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use pagoda_gguf::{
    gguf_bytes, shard_file_name, split_gguf_bytes, GgufFile, TensorToWrite, TensorType,
};
use pagoda_models::loader::{
    load_config, load_model, LoadOptions, QuantDot, QuantPages, QuantRepack,
};
use pagoda_models::quant::{dequantize_row, QuantBytes, QuantPart};
use pagoda_models::{ForwardBatch, Isa, KvCacheShape, ModelRunner, WeightDtype};

/// Max |logit - transformers| with 8-bit activations (`QuantDot::Int8`): about twice the
/// worst measured, 0.27 on logits up to 8.7 (the exact path: 1.6e-5).
const INT8_BOUND: f32 = 0.5;

const FILES: [&str; 4] = [
    "tiny-qwen2-f16.gguf",
    "tiny-mistral-q8_0.gguf",
    "tiny-qwen3-q4_0.gguf",
    "tiny-qwen2-kquants.gguf",
];

fn gguf_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/gguf")
        .join(file)
}

struct GgufCase {
    input_ids: Vec<u32>,
    last_logits: Vec<f32>,
    greedy_ids: Vec<u32>,
    margins: Vec<f32>,
}

fn read_json(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(gguf_path(name)).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn gguf_cases(file: &str) -> Vec<GgufCase> {
    let json = read_json(&format!("{file}.reference.json"));
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| GgufCase {
            input_ids: ids(&c["input_ids"]),
            last_logits: floats(&c["last_logits"]),
            greedy_ids: ids(&c["greedy_ids"]),
            margins: floats(&c["margins"]),
        })
        .collect()
}

fn gguf_runner(file: &str, num_blocks: usize, isa: Isa) -> ModelRunner {
    gguf_runner_with(file, num_blocks, isa, QuantRepack::Auto)
}

/// Exact products (`QuantDot::Exact`): the weights transformers ran with, in f32.
fn gguf_runner_with(file: &str, num_blocks: usize, isa: Isa, repack: QuantRepack) -> ModelRunner {
    let options = LoadOptions {
        repack,
        quant_dot: QuantDot::Exact,
        ..Default::default()
    };
    gguf_runner_from(file, num_blocks, isa, &options)
}

fn gguf_runner_from(file: &str, num_blocks: usize, isa: Isa, options: &LoadOptions) -> ModelRunner {
    runner_at(&gguf_path(file), num_blocks, isa, options)
}

fn runner_at(path: &Path, num_blocks: usize, isa: Isa, options: &LoadOptions) -> ModelRunner {
    let (model, _) = load_model(path, options).unwrap();
    let cfg = &model.config;
    let shape = KvCacheShape {
        num_layers: cfg.num_layers,
        num_blocks,
        block_size: BLOCK_SIZE,
        num_kv_heads: cfg.num_kv_heads,
        head_dim: cfg.head_dim,
        dtype: WeightDtype::F32,
    };
    ModelRunner::with_isa(model, shape, isa).unwrap()
}

/// The logits of `prompt` and of `steps` greedy tokens after it (`run_alone`), of the GGUF
/// file at `path` on this CPU's kernels.
fn logits_at(path: &Path, options: &LoadOptions, prompt: &[u32], steps: usize) -> Vec<Vec<f32>> {
    let mut runner = runner_at(path, 8, pagoda_models::kernels::isa(), options);
    run_alone(&mut runner, prompt, steps, 7).0
}

#[test]
fn every_tensor_type_decodes_bit_for_bit_as_the_gguf_package_does() {
    let file = GgufFile::open(&gguf_path("quant-blocks.gguf")).unwrap();
    let types = [
        TensorType::F32,
        TensorType::F16,
        TensorType::BF16,
        TensorType::Q8_0,
        TensorType::Q4_0,
        TensorType::Q4_1,
        TensorType::Q5_0,
        TensorType::Q5_1,
        TensorType::Q4K,
        TensorType::Q5K,
        TensorType::Q6K,
        TensorType::Q2K,
        TensorType::Q3K,
        TensorType::IQ4NL,
        TensorType::IQ4XS,
        TensorType::IQ2XXS,
        TensorType::IQ2XS,
        TensorType::IQ2S,
        TensorType::IQ3XXS,
        TensorType::IQ3S,
        TensorType::IQ1S,
        TensorType::IQ1M,
    ];
    for tensor_type in types {
        let name = tensor_type.name();
        let info = file.tensor(&name).unwrap();
        assert_eq!(info.tensor_type, tensor_type);
        let want_info = file.tensor(&format!("{name}.dequantized")).unwrap();
        let want: Vec<f32> = file
            .tensor_bytes(want_info)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let (rows, cols) = (info.shape()[0], info.shape()[1]);
        let bytes = file.tensor_bytes(info).unwrap();
        let row_bytes = bytes.len() / rows;
        let mut got = vec![0.0f32; cols];
        for r in 0..rows {
            dequantize_row(
                tensor_type,
                &bytes[r * row_bytes..(r + 1) * row_bytes],
                &mut got,
            );
            for (k, (a, b)) in got.iter().zip(&want[r * cols..(r + 1) * cols]).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{name} row {r} value {k}: {a} vs {b}"
                );
            }
        }
        // Q4_0 and Q5_0 widened to Q8_0 blocks (`--quant-repack`) hold the same values.
        let part = QuantPart::new(
            tensor_type,
            rows,
            cols,
            QuantBytes::Owned(std::sync::Arc::new(bytes.to_vec())),
        )
        .unwrap();
        if let Some(wide) = part.widened_to_q8_0() {
            assert_eq!(wide.tensor_type, TensorType::Q8_0);
            for r in 0..rows {
                wide.row_to_f32(r, &mut got);
                let same = got
                    .iter()
                    .zip(&want[r * cols..(r + 1) * cols])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{name} widened to Q8_0, row {r}");
            }
        }
    }
}

/// The weights are exactly those transformers ran with (the decoders are bit-exact), so only
/// the order of summation differs: the same bound as the safetensors references.
#[test]
fn gguf_models_match_transformers_on_their_decoded_weights() {
    for file in FILES {
        let mut runner = gguf_runner(file, 64, pagoda_models::kernels::isa());
        for (i, case) in gguf_cases(file).iter().enumerate() {
            let (logits, generated) = run_alone(
                &mut runner,
                &case.input_ids,
                case.greedy_ids.len(),
                i as u64,
            );
            let diff = max_abs_diff(&logits[0], &case.last_logits);
            assert!(diff < 1e-4, "{file} case {i}: max |diff| {diff}");
            // Greedy tokens agree up to the first near tie (a 1e-4 difference could flip it).
            let agreed = case.margins.iter().take_while(|m| **m > 1e-3).count();
            assert_eq!(
                generated[..agreed],
                case.greedy_ids[..agreed],
                "{file} case {i}"
            );
        }
    }
}

#[test]
fn quantized_logits_are_bitwise_the_same_alone_batched_and_on_every_path() {
    for (file, quant_dot) in FILES
        .iter()
        .flat_map(|f| [(*f, QuantDot::Exact), (*f, QuantDot::Int8)])
    {
        // Alone from the file's map; batched from the copy in 2 MiB pages where the kernel
        // offers them (`QuantPages::Auto`): the same bits either way.
        let mapped = LoadOptions {
            quant_dot,
            pages: QuantPages::Mapped,
            ..Default::default()
        };
        let options = LoadOptions {
            quant_dot,
            ..Default::default()
        };
        let cases = gguf_cases(file);
        let mut alone_runner = gguf_runner_from(file, 128, Isa::Scalar, &mapped);
        let alone: Vec<Vec<f32>> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| {
                run_alone(&mut alone_runner, &c.input_ids, 0, i as u64)
                    .0
                    .remove(0)
            })
            .collect();
        for isa in Isa::supported() {
            let mut runner = gguf_runner_from(file, 128, isa, &options);
            let mut alloc = ScatteredBlocks::new(128, 3);
            let mut seqs: Vec<Sequence> =
                cases.iter().map(|c| Sequence::new(&c.input_ids)).collect();
            // Every prompt in one batch, scattered blocks.
            let mut batch = ForwardBatch::new(BLOCK_SIZE);
            for seq in seqs.iter_mut() {
                let n = seq.tokens.len();
                seq.schedule(n, &mut batch, &mut alloc);
            }
            let last = runner.forward(&batch).unwrap().data;
            let vocab = alone[0].len();
            for (i, want) in alone.iter().enumerate() {
                let got = &last[i * vocab..(i + 1) * vocab];
                let same = got
                    .iter()
                    .zip(want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{file} {quant_dot:?} case {i} on {isa}: batched differs from alone"
                );
            }
        }
    }
}

/// llama.cpp's last logits for the same file and prompts (scripts/llamacpp_logits.sh), which
/// quantizes activations too: per 32 values for Q8_0/Q4_0, per 256 for K-quants.
fn llamacpp_logits(file: &str) -> Vec<Vec<f32>> {
    let json = read_json(&format!("{file}.llamacpp.json"));
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| floats(&c["last_logits"]))
        .collect()
}

/// 8-bit activations (the default) move the logits no further from transformers than
/// llama.cpp's run of the same file does; greedy tokens agree with transformers wherever its
/// top-2 margin exceeds twice the bound.
#[test]
fn int8_products_stay_near_transformers() {
    const BOUND: f32 = INT8_BOUND;
    let options = LoadOptions {
        quant_dot: QuantDot::Int8,
        ..Default::default()
    };
    for file in &FILES[1..] {
        let (mut worst, mut llamacpp_worst) = (0.0f32, 0.0f32);
        let cases = gguf_cases(file);
        let llamacpp = llamacpp_logits(file);
        assert_eq!(llamacpp.len(), cases.len(), "{file}");
        let mut runner = gguf_runner_from(file, 64, pagoda_models::kernels::isa(), &options);
        let mut exact = gguf_runner(file, 64, pagoda_models::kernels::isa());
        for (i, case) in cases.iter().enumerate() {
            let n = case.greedy_ids.len();
            let (logits, generated) = run_alone(&mut runner, &case.input_ids, n, i as u64);
            let (exact_logits, _) = run_alone(&mut exact, &case.input_ids, 0, i as u64);
            let diff = max_abs_diff(&logits[0], &case.last_logits);
            worst = worst.max(diff);
            llamacpp_worst = llamacpp_worst.max(max_abs_diff(&llamacpp[i], &case.last_logits));
            assert!(diff < BOUND, "{file} case {i}: max |diff| {diff}");
            // Integer products really ran: the logits differ from the exact ones.
            assert!(
                max_abs_diff(&logits[0], &exact_logits[0]) > 0.0,
                "{file} case {i}"
            );
            let agreed = case
                .margins
                .iter()
                .take_while(|m| **m > 2.0 * BOUND)
                .count();
            assert_eq!(
                generated[..agreed],
                case.greedy_ids[..agreed],
                "{file} case {i}"
            );
        }
        eprintln!(
            "{file}: worst max |diff| from transformers {worst}, llama.cpp's {llamacpp_worst}"
        );
        assert!(
            worst <= llamacpp_worst,
            "{file}: int8 max |diff| {worst} > llama.cpp's {llamacpp_worst}"
        );
    }
}

/// Widening Q4_0 to Q8_0 costs memory and changes no bit of the logits.
#[test]
fn q4_0_widened_to_q8_0_gives_the_same_logits() {
    let file = "tiny-qwen3-q4_0.gguf";
    let isa = pagoda_models::kernels::isa();
    let mut narrow = gguf_runner_with(file, 64, isa, QuantRepack::Off);
    let mut wide = gguf_runner_with(file, 64, isa, QuantRepack::Q8_0);
    assert!(wide.model().weight_bytes() > narrow.model().weight_bytes());
    for (i, case) in gguf_cases(file).iter().enumerate() {
        let (a, ids_a) = run_alone(&mut narrow, &case.input_ids, 4, i as u64);
        let (b, ids_b) = run_alone(&mut wide, &case.input_ids, 4, i as u64);
        assert_eq!(ids_a, ids_b);
        for (x, y) in a.iter().zip(&b) {
            assert!(
                x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()),
                "case {i}"
            );
        }
    }
}

#[test]
fn gguf_metadata_gives_the_checkpoint_config() {
    let gguf = load_config(&gguf_path("tiny-mistral-q8_0.gguf")).unwrap();
    let hf = load_config(&model_dir("tiny-mistral")).unwrap();
    assert_eq!(
        (gguf.hidden_size, gguf.intermediate_size, gguf.num_layers),
        (hf.hidden_size, hf.intermediate_size, hf.num_layers)
    );
    assert_eq!(
        (
            gguf.num_heads,
            gguf.num_kv_heads,
            gguf.head_dim,
            gguf.vocab_size
        ),
        (hf.num_heads, hf.num_kv_heads, hf.head_dim, hf.vocab_size)
    );
    assert_eq!(gguf.rms_norm_eps as f32, hf.rms_norm_eps as f32);
    assert_eq!(gguf.rope_theta, hf.rope_theta);
    assert_eq!(gguf.tie_word_embeddings, hf.tie_word_embeddings);
    assert!(
        load_config(&gguf_path("tiny-qwen2-f16.gguf"))
            .unwrap()
            .tie_word_embeddings
    );
}

#[test]
fn quantized_weights_stay_quantized_in_memory() {
    let options = LoadOptions {
        repack: QuantRepack::Off,
        ..Default::default()
    };
    let (model, _) = load_model(&gguf_path("tiny-qwen2-kquants.gguf"), &options).unwrap();
    let file_bytes = std::fs::metadata(gguf_path("tiny-qwen2-kquants.gguf"))
        .unwrap()
        .len() as usize;
    // Decoded to f32 the matrices would take about 7x the file.
    assert!(
        model.weight_bytes() < file_bytes,
        "{} bytes of weights from a {file_bytes}-byte file",
        model.weight_bytes()
    );
}

/// `values` as Q8_0 blocks (scale `max|x| / 127` in f16, bytes `round(x / scale)`), and the
/// f32 values those blocks decode to.
fn q8_0_blocks(values: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut blocks, mut decoded) = (Vec::new(), Vec::new());
    for chunk in values.chunks_exact(32) {
        let max = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = half::f16::from_f32(max / 127.0);
        blocks.extend(scale.to_le_bytes());
        for v in chunk {
            let q = (v / scale.to_f32()).round().clamp(-127.0, 127.0) as i8;
            blocks.push(q as u8);
            decoded.push(scale.to_f32() * q as f32);
        }
    }
    (blocks, decoded)
}

/// llama.cpp writes norms and biases as F32; a file holding one quantized is decoded, and
/// runs exactly as the same file with the decoded values stored as F32.
#[test]
fn a_quantized_norm_runs_as_its_decoded_values() {
    let src = GgufFile::open(&gguf_path("tiny-qwen2-f16.gguf")).unwrap();
    let tensors = src.tensors_to_write();
    let norm = tensors
        .iter()
        .position(|t| t.name == "output_norm.weight")
        .unwrap();
    assert_eq!(tensors[norm].type_id, TensorType::F32.id());
    let values: Vec<f32> = bytemuck::pod_collect_to_vec(&tensors[norm].bytes);
    let (blocks, decoded) = q8_0_blocks(&values);
    assert_ne!(decoded, values, "the blocks round the norm");
    let write = |name: &str, type_id: u32, bytes: Vec<u8>| {
        let mut tensors = tensors.clone();
        tensors[norm].type_id = type_id;
        tensors[norm].bytes = bytes;
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&path, gguf_bytes(&src.metadata, &tensors)).unwrap();
        path
    };
    let quantized = write("norm-q8_0.gguf", TensorType::Q8_0.id(), blocks);
    let float = write(
        "norm-f32.gguf",
        TensorType::F32.id(),
        bytemuck::cast_slice(&decoded).to_vec(),
    );
    let logits = |path: &PathBuf| logits_at(path, &LoadOptions::default(), &[5, 17, 3, 250], 2);
    let (a, b) = (logits(&quantized), logits(&float));
    assert_eq!(a, b);
    assert_ne!(
        a,
        logits(&gguf_path("tiny-qwen2-f16.gguf")),
        "the norm's rounding shows"
    );
}

/// A split set (gguf-split's shards) loads from any of its shards and computes bit for bit
/// what the file it was cut from computes, its weights read from each shard's map or copied.
#[test]
fn a_split_file_computes_what_the_whole_file_does() {
    let whole = "tiny-qwen2-kquants.gguf";
    let src = GgufFile::open(&gguf_path(whole)).unwrap();
    let tensors = src.tensors_to_write();
    let shares = [2, 7, tensors.len() - 9];
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("split-kquants");
    std::fs::create_dir_all(&dir).unwrap();
    let shards: Vec<PathBuf> = split_gguf_bytes(&src.metadata, &tensors, &shares)
        .into_iter()
        .enumerate()
        .map(|(no, bytes)| {
            let path = dir.join(shard_file_name("tiny-qwen2-kquants", no, shares.len()));
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    let logits = |path: &PathBuf, pages: QuantPages| {
        let options = LoadOptions {
            pages,
            ..Default::default()
        };
        logits_at(path, &options, &[5, 17, 3, 250, 9], 3)
    };
    let want = logits(&gguf_path(whole), QuantPages::Mapped);
    for pages in [QuantPages::Mapped, QuantPages::Auto] {
        for shard in &shards {
            assert_eq!(logits(shard, pages), want, "{} {pages:?}", shard.display());
        }
    }
    assert_eq!(
        load_config(&shards[1]).unwrap().hidden_size,
        load_config(&gguf_path(whole)).unwrap().hidden_size
    );
}

/// A model whose matrices are random blocks of the types `pick` gives each (from its name),
/// scale fields of a plausible size, against the same file with the decoded values stored as
/// F32: the worst logit distance with exact products (`QuantDot::Exact`) and with 8-bit
/// activations (`QuantDot::Int8`), and the largest logit.
fn random_blocks_against_their_decoded_values(
    tag: &str,
    pick: impl Fn(&str) -> TensorType,
) -> (f32, f32, f32) {
    let src = GgufFile::open(&gguf_path("tiny-qwen2-kquants.gguf")).unwrap();
    let mut seed = 12345u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as u8
    };
    let (mut quantized, mut float) = (Vec::new(), Vec::new());
    for t in src.tensors() {
        let mut tensor = TensorToWrite {
            name: t.name.clone(),
            dims: t.dims.clone(),
            type_id: t.tensor_type.id(),
            bytes: src.tensor_bytes(t).unwrap().to_vec(),
        };
        if !t.name.starts_with("blk.") || t.dims.len() != 2 {
            quantized.push(tensor.clone());
            float.push(tensor);
            continue;
        }
        let tensor_type = pick(&t.name);
        let (values, block) = tensor_type.block().unwrap();
        let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
        let mut bytes: Vec<u8> = (0..rows * cols / values * block).map(|_| next()).collect();
        // Scale fields (f16) of a plausible size, weights up to about 0.3 (IQ4_XS's `d` is
        // multiplied by sub-block scales up to 32, and its values reach 127); quants and
        // sub-block scales stay random.
        let (d_at, d_size) = match tensor_type {
            // Q2_K: `dmin` random, `d` 0.01 below.
            TensorType::Q2K => (82, 1.0),
            TensorType::Q3K => (108, 1.0),
            TensorType::IQ4NL => (0, 1.0),
            TensorType::IQ4XS => (0, 1.0 / 32.0),
            // The codebook types' largest weights: about 170 d (IQ2), 480 d (IQ3), 17 d (IQ1).
            TensorType::IQ2XXS | TensorType::IQ2XS | TensorType::IQ2S => (0, 1.0),
            TensorType::IQ3XXS | TensorType::IQ3S => (0, 0.3),
            TensorType::IQ1S => (0, 8.0),
            // `d`'s f16 bits are the top nibbles of the four scale words (below).
            TensorType::IQ1M => (usize::MAX, 8.0),
            other => panic!("no scale fields for {other}"),
        };
        for b in bytes.chunks_exact_mut(block) {
            let d = (0.0005 + f32::from(next()) / 255.0 * 0.002) * d_size;
            let d_bits = half::f16::from_f32(d).to_bits();
            if d_at == usize::MAX {
                for i in 0..4 {
                    let high = &mut b[48 + 2 * i + 1];
                    *high = (*high & 15) | ((((d_bits >> (4 * i)) & 15) as u8) << 4);
                }
                continue;
            }
            b[d_at..d_at + 2].copy_from_slice(&d_bits.to_le_bytes());
            if tensor_type == TensorType::Q2K {
                b[80..82].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
            }
        }
        let mut decoded = vec![0.0f32; rows * cols];
        for (row, out) in bytes
            .chunks_exact(cols / values * block)
            .zip(decoded.chunks_exact_mut(cols))
        {
            dequantize_row(tensor_type, row, out);
        }
        tensor.type_id = tensor_type.id();
        tensor.bytes = bytes;
        quantized.push(tensor.clone());
        tensor.type_id = TensorType::F32.id();
        tensor.bytes = bytemuck::cast_slice(&decoded).to_vec();
        float.push(tensor);
    }
    let logits = |name: &str, tensors: &[TensorToWrite], quant_dot: QuantDot| {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{tag}-{name}"));
        std::fs::write(&path, gguf_bytes(&src.metadata, tensors)).unwrap();
        let options = LoadOptions {
            quant_dot,
            ..Default::default()
        };
        logits_at(&path, &options, &[5, 17, 3, 250, 9, 77, 1000, 64, 31], 4).concat()
    };
    let want = logits("decoded.gguf", &float, QuantDot::Exact);
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.5, "logits of some size: {scale}");
    let worst = |got: &[f32]| {
        got.iter()
            .zip(&want)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()))
    };
    let exact = logits("blocks.gguf", &quantized, QuantDot::Exact);
    let int8 = logits("blocks.gguf", &quantized, QuantDot::Int8);
    assert_ne!(int8, exact, "{tag}: the integer kernels ran");
    assert_ne!(
        exact,
        logits("unchanged.gguf", &src.tensors_to_write(), QuantDot::Exact),
        "{tag}: the random matrices are what runs"
    );
    (worst(&exact), worst(&int8), scale)
}

/// Q2_K and Q3_K (what Q2_K and Q3_K_S/M/L files hold): a model of random Q2_K/Q3_K blocks
/// computes what the same file with the decoded values stored as F32 computes, up to the
/// order of float sums with exact products, and near it with 8-bit activations.
#[test]
fn q2_k_and_q3_k_matrices_compute_their_decoded_values() {
    // Q3_K_M's pattern in spirit: Q3_K mostly, Q2_K for the down projections.
    let (exact, int8, scale) = random_blocks_against_their_decoded_values("q3_k_m-like", |name| {
        if name.contains("ffn_down") {
            TensorType::Q2K
        } else {
            TensorType::Q3K
        }
    });
    assert!(
        exact <= 1e-4 * scale.max(1.0),
        "{exact} on logits up to {scale}"
    );
    // Measured: 0.58 on logits up to 8.8 (0.55 with Q2_K on f32 products), random 2- and
    // 3-bit weights with random sub-block scales being rougher than trained ones (the Q4_K_M
    // fixture's own int8 error here: 0.20 of 9.7); the integer kernels themselves match
    // their definition to 1e-5 (quant_matmul's tests).
    assert!(int8 <= 0.1 * scale, "{int8} on logits up to {scale}");
}

/// IQ4_NL and IQ4_XS (what IQ4_XS files hold; IQ4_NL where a row is not a multiple of 256)
/// as Q2_K and Q3_K above.
#[test]
fn iq4_nl_and_iq4_xs_matrices_compute_their_decoded_values() {
    let (exact, int8, scale) = random_blocks_against_their_decoded_values("iq4_xs-like", |name| {
        if name.contains("attn_v") || name.contains("ffn_down") {
            TensorType::IQ4NL
        } else {
            TensorType::IQ4XS
        }
    });
    assert!(
        exact <= 1e-4 * scale.max(1.0),
        "{exact} on logits up to {scale}"
    );
    // Measured: 0.21 on logits up to 9.9.
    assert!(int8 <= 0.1 * scale, "{int8} on logits up to {scale}");
}

/// The codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: what IQ1/IQ2/IQ3
/// files hold) as Q2_K and Q3_K above, each projection of a layer in another type.
#[test]
fn codebook_matrices_compute_their_decoded_values() {
    let (exact, int8, scale) = random_blocks_against_their_decoded_values("iq-codebooks", |name| {
        let by_projection = [
            ("attn_q", TensorType::IQ2XXS),
            ("attn_k", TensorType::IQ2XS),
            ("attn_v", TensorType::IQ3XXS),
            ("attn_output", TensorType::IQ2S),
            ("ffn_gate", TensorType::IQ3S),
            ("ffn_up", TensorType::IQ1S),
            ("ffn_down", TensorType::IQ1M),
        ];
        by_projection
            .iter()
            .find(|(part, _)| name.contains(part))
            .map(|&(_, t)| t)
            .unwrap_or_else(|| panic!("no type for {name}"))
    });
    assert!(
        exact <= 1e-4 * scale.max(1.0),
        "{exact} on logits up to {scale}"
    );
    // Measured: 0.29 on logits up to 10.4 (exact products: 1.5e-5).
    assert!(int8 <= 0.1 * scale, "{int8} on logits up to {scale}");
}
