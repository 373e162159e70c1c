//! STREAM-style read bandwidth: how fast `threads` threads can stream a buffer far larger than
//! the caches, the ceiling for batch-1 decode (which reads every weight once per token).
//!
//!     cargo run --release -p pagoda-models --example read_bandwidth -- [THREADS] [MIB] [PASSES]
//!
//! Each thread sums its own contiguous share with eight independent lanes (so the adds never
//! wait on each other); the best pass is reported, as STREAM does.

use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are numbers"))
        .collect();
    let threads = args.first().copied().unwrap_or(1).max(1);
    let mib = args.get(1).copied().unwrap_or(1024).max(64);
    let passes = args.get(2).copied().unwrap_or(5).max(1);
    let words = mib * (1 << 20) / 8;
    // Written once, so every page is really backed before timing.
    let data: Vec<u64> = (0..words as u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9))
        .collect();
    let share = words.div_ceil(threads);
    let mut best = f64::MAX;
    let mut checksum = 0u64;
    for _ in 0..passes {
        let start = Instant::now();
        checksum ^= std::thread::scope(|s| {
            let handles: Vec<_> = data
                .chunks(share)
                .map(|chunk| s.spawn(move || sum_lanes(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("reader thread"))
                .fold(0, u64::wrapping_add)
        });
        best = best.min(start.elapsed().as_secs_f64());
    }
    let gbps = (words * 8) as f64 / best / 1e9;
    println!("read bandwidth: {gbps:.1} GB/s with {threads} thread(s) over {mib} MiB (best of {passes}; checksum {checksum:x})");
}

fn sum_lanes(chunk: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let mut blocks = chunk.chunks_exact(8);
    for block in &mut blocks {
        for (l, v) in lanes.iter_mut().zip(block) {
            *l = l.wrapping_add(*v);
        }
    }
    let tail: u64 = blocks.remainder().iter().fold(0, |a, v| a.wrapping_add(*v));
    lanes.iter().fold(tail, |a, v| a.wrapping_add(*v))
}
