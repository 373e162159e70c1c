pub mod audit;
pub mod bench_engine;
pub mod bench_forward;
pub mod generate;
pub mod keys;
pub mod redteam;
pub mod usage;
