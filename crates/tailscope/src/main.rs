//! The `tailscope` binary: argument parsing, wiring of the domain crates, printing. No domain
//! logic lives here (DESIGN.md): each subcommand validates its arguments into the domain
//! crates' configuration types first, then runs them, then prints.
//!
//! Exit codes: 0 success, 1 the measurement itself failed or was invalid, 2 bad usage or input.
//! A closed stdout (`tailscope runs list | head -1`) is success: see `output::write_stdout`.

mod cli;
mod cmd;
mod exit;
mod output;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    // Output still buffered is part of the command: failing to write it fails the command.
    let done = cmd::dispatch(args).and_then(|code| {
        output::flush_stdout()?;
        Ok(code)
    });
    let code = match done {
        Ok(code) => code,
        Err(e) => {
            let code = exit::code_of(&e);
            // One clear line naming the problem (the chain of causes joined on that line).
            eprintln!("tailscope: {e:#}");
            code
        }
    };
    std::process::exit(code);
}
