//! `delayq`: see what is queued, stuck or dead in a delayq namespace, act on it, or watch it
//! live in a browser (`delayq dashboard`). Tables for people, `--json` for scripts; exit code
//! 0 ok, 1 error, 2 usage.

mod args;
mod commands;
mod dashboard;
mod failure;
mod namespace;
mod report;

use std::process::ExitCode;

use clap::Parser;

use args::Cli;
use failure::Failure;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let json = cli.json;
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let (code, text) = match failure {
                Failure::Usage(text) => (2, text),
                Failure::Failed(text) | Failure::NotFound(text) => (1, text),
            };
            if json {
                println!("{}", serde_json::json!({ "error": text }));
            }
            eprintln!("error: {}", report::printable_lines(&text));
            ExitCode::from(code)
        }
    }
}
