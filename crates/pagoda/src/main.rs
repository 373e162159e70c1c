//! `pagoda`: serve, generate, bench, plan.

mod commands;
mod model_args;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "pagoda", version, about = "Pagoda: serve open-weight LLMs, measure them, plan capacity")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Complete one prompt and print the result.
    Generate(commands::generate::GenerateArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Prefill and decode tokens/s of the model runner alone, per batch size.
    Forward(commands::bench_forward::BenchForwardArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(args) => commands::generate::run(args),
        Command::Bench(BenchCommand::Forward(args)) => commands::bench_forward::run(args),
    };
    if let Err(e) = result {
        // One line, the whole chain of causes, non-zero exit.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
