//! The `tailscope` binary: argument parsing, wiring of the domain crates, printing. No domain
//! logic lives here (DESIGN.md): each subcommand validates its arguments into the domain
//! crates' configuration types first, then runs them, then prints.
//!
//! Exit codes: 0 success, 1 the measurement itself failed or was invalid, 2 bad usage or input.

mod cli;
mod cmd;
mod exit;
mod output;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let code = match cmd::dispatch(args) {
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
