pub mod audit;
pub mod bench_engine;
pub mod bench_forward;
mod forward_cost;
pub mod generate;
pub mod keys;
pub mod redteam;
pub mod usage;
