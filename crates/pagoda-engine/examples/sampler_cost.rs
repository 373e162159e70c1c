//! Time to sample one vocabulary-sized row (Qwen2's 151,936 entries): greedy, and a draw at
//! temperature 1 (the server's default), medians over repeated calls.
//!
//!   cargo run --release -p pagoda-engine --example sampler_cost -- [VOCAB] [CALLS]

use pagoda_engine::{SampleInput, Sampler, SamplerRng, SamplingParams};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let vocab: usize = args.next().map_or(151_936, |a| a.parse().expect("VOCAB"));
    let calls: usize = args.next().map_or(200, |a| a.parse().expect("CALLS"));
    // Logits shaped like a model's: a few large, most spread around zero.
    let mut rng = SamplerRng::from_seed(7);
    let row: Vec<f32> = (0..vocab)
        .map(|_| (rng.next_f64() as f32 - 0.5) * 8.0)
        .collect();
    let cases = [
        ("greedy", SamplingParams::greedy(16)),
        ("temperature 1", SamplingParams::default()),
        (
            "top_p 0.95 top_k 40",
            SamplingParams {
                top_p: 0.95,
                top_k: Some(40),
                ..SamplingParams::default()
            },
        ),
    ];
    let mut sampler = Sampler::new();
    for (name, params) in cases {
        let mut times = Vec::with_capacity(calls);
        let mut draws = SamplerRng::from_seed(1);
        let mut logits = row.clone();
        for _ in 0..calls {
            logits.copy_from_slice(&row);
            let start = Instant::now();
            let token = sampler.sample(
                &mut logits,
                SampleInput {
                    params: &params,
                    prompt: &[0],
                    output: &[],
                    eos_token_ids: &[],
                    rng: &mut draws,
                    allowed: None,
                },
            );
            times.push(start.elapsed().as_secs_f64());
            std::hint::black_box(token);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:>20}: {:8.1} us per row (median of {calls}, vocab {vocab})",
            times[calls / 2] * 1e6
        );
    }
}
