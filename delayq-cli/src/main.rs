//! `delayq`: see what is queued, stuck or dead in a delayq namespace, act on it, or watch it
//! live in a browser (`delayq dashboard`). Tables for people, `--json` for scripts; exit code
//! 0 ok, 1 error, 2 usage. With `--json` every error is `{"error": "…"}` on stdout (and its
//! text on stderr), the command line's own too.

mod args;
mod commands;
mod dashboard;
mod failure;
mod namespace;
mod output;
mod report;

use std::process::ExitCode;

use clap::Parser;

use args::Cli;
use failure::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return command_line(&e),
    };
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
            failed(json, code, &text)
        }
    }
}

/// The error's exit code, its text on stderr and, with `--json`, as `{"error": …}` on stdout
/// (when stdout can take it: the text is on stderr either way).
fn failed(json: bool, code: u8, text: &str) -> ExitCode {
    if json {
        let _ = output::line(&serde_json::json!({ "error": text }).to_string());
    }
    eprintln!("error: {}", report::printable_lines(text));
    ExitCode::from(code)
}

/// What clap answers instead of a command: help or the version on stdout (exit 0; 1 when
/// stdout cannot take it), or a usage error (exit 2) as every other error is shown.
fn command_line(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() {
        use std::io::Write;
        return match e.print().and_then(|()| std::io::stdout().flush()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("error: cannot write to stdout: {why}");
                ExitCode::from(1)
            }
        };
    }
    let code = u8::try_from(e.exit_code()).unwrap_or(2);
    if wants_json() {
        let text = e.render().to_string();
        let error = if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        {
            // `delayq dead`: clap shows the help; what is missing is the command.
            let usage = text.lines().find(|l| l.starts_with("Usage:")).unwrap_or("");
            format!("a command is missing ({usage}); --help lists them")
        } else {
            // The first paragraph, without clap's `error: ` and its pointers to --help.
            let text = text.trim_start_matches("error: ");
            text.split("\n\n").next().unwrap_or(text).trim().to_string()
        };
        let _ = output::line(&serde_json::json!({ "error": error }).to_string());
    }
    // clap's own text on stderr, with its usage line (and colours on a terminal).
    let _ = e.print();
    ExitCode::from(code)
}

/// Whether `--json` is among the arguments (before a `--`): clap could not read them, so
/// `Cli::json` is not there to ask.
fn wants_json() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}
