pub mod bench_forward;
pub mod generate;
