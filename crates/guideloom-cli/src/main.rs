//! The `guideloom` command-line tool: write, publish, inspect, read, verify, annotate and
//! benchmark sharded datasets; `guideloom quickstart` runs the whole path on a fresh machine.
//!
//! Exit status: 0 on success, 1 on failure (one line on stderr naming the object or argument
//! at fault), 2 on a usage error. See `docs/cli.md`.

mod cli;
mod commands;
mod error;
mod input;
mod output;
mod root;
mod work;

use std::process::ExitCode;

use clap::FromArgMatches;
// The exact JSON reader and writer live in the library half (`src/lib.rs`) so the fuzz
// targets can link them; `crate::json` names them here as before.
use guideloom_cli::json;

use crate::cli::{Cli, Command};
use crate::error::{CliError, Result};

fn main() -> ExitCode {
    let cli = parse();
    let json = cli.global.json;
    // The process's one runtime, shared with the library's synchronous doors.
    let bridge = match guideloom_io::bridge::Bridge::shared() {
        Ok(bridge) => bridge,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match bridge.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            // `--json` callers read stdout: the error is a JSON document there too.
            // (`verify` already printed its report, problems included.)
            if json && !matches!(e, CliError::Unsound { .. }) {
                println!("{}", e.to_json());
            }
            // One line, with the install command when a left-out cargo feature is the cause.
            match e.feature_hint() {
                Some(hint) => eprintln!("error: {}; {hint}", e.one_line()),
                None => eprintln!("error: {}", e.one_line()),
            }
            ExitCode::from(error::exit_status(e.kind()))
        }
    }
}

/// Parses the command line (exit status 2 and clap's message on a usage error, including a
/// root given twice with different values or not at all).
fn parse() -> Cli {
    let mut command = cli::command();
    let matches = command.get_matches_mut();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command).exit());
    if let Err(what) = cli.command.resolve_root() {
        let sub = matches.subcommand_name().unwrap_or_default().to_owned();
        let mut sub_command = command
            .find_subcommand_mut(&sub)
            .cloned()
            .unwrap_or(command);
        sub_command
            .error(clap::error::ErrorKind::ArgumentConflict, what)
            .exit();
    }
    if let Err(what) = cli.command.check_bounds() {
        let sub = matches.subcommand_name().unwrap_or_default().to_owned();
        let mut sub_command = command
            .find_subcommand_mut(&sub)
            .cloned()
            .unwrap_or(command);
        sub_command
            .error(clap::error::ErrorKind::ValueValidation, what)
            .exit();
    }
    cli
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let global = &cli.global;
    match cli.command {
        Command::Write(a) => commands::write::run(a, global).await,
        Command::Publish(a) => commands::publish::run(a, global).await,
        Command::Info(a) => commands::info::run(a, global).await,
        Command::Get(a) => commands::read::get(a, global).await,
        Command::Cat(a) => commands::read::cat(a, global).await,
        Command::Verify(a) => commands::verify::run(a, global).await,
        Command::Annotate(a) => commands::annotate::run(a, global).await,
        Command::Bench(a) => commands::bench::run(a, global).await,
        Command::Quickstart(a) => commands::quickstart::run(a, global).await,
        Command::Convert(a) => commands::convert::run(a, global).await,
        Command::Annotations(a) => commands::annotations::run(a, global).await,
        Command::Import(a) => commands::import::run(a, global).await,
        Command::Export(a) => commands::export::run(a, global).await,
        Command::Gc(a) => commands::keep::gc(a, global).await,
        Command::Tag(a) => commands::keep::tag(a, global).await,
        Command::Compact(a) => commands::compact::run(a, global).await,
        Command::Card(a) => commands::card::run(a, global).await,
        Command::Serve(a) => commands::serve::run(a, global).await,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn the_shard_size_bound_is_the_libraries() {
        assert_eq!(
            crate::cli::MAX_SHARD_BYTES,
            guideloom_publish::RootOptions::default().max_encoded_shard_bytes
        );
    }
}
