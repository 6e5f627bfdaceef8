//! The `tailscope` binary: argument parsing, wiring of the domain crates, printing. No domain
//! logic lives here (DESIGN.md): each subcommand validates its arguments into the domain
//! crates' configuration types first, then runs them, then prints.
//!
//! Exit codes: 0 success, 1 the measurement itself failed or was invalid, 2 bad usage or input,
//! 3 measured fine but the SLO violated (`exit::SLO_VIOLATED`).
//! A closed stdout (`tailscope runs list | head -1`) is success: see `output::write_stdout`.

mod cli;
mod cmd;
mod exit;
mod limits;
mod output;

use clap::Parser;

/// Ends the process for a command line clap refused: exit 2 with one line, as for every other
/// usage error (clap's hints joined onto it); help and version print as clap prints them.
fn refuse_command_line(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    if e.kind() == ErrorKind::InvalidUtf8 {
        eprintln!(
            "tailscope: {}",
            exit::one_line(&not_utf8(std::env::args_os()))
        );
        std::process::exit(2)
    }
    let text = e.render().to_string();
    // "the following required arguments were not provided:" lists them on indented lines.
    let listed: Vec<&str> = text
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with(' ') && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("bad command line");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if line.ends_with(':') && !listed.is_empty() {
        line.push(' ');
        line.push_str(&listed.join(", "));
    }
    for more in lines.filter(|l| l.starts_with("tip:") || l.starts_with("[possible values:")) {
        line.push_str(&format!(" ({})", more.trim_matches(['[', ']'])));
    }
    eprintln!("tailscope: {}", exit::one_line(&line));
    std::process::exit(2)
}

/// Which arguments are not UTF-8 (clap only says that one is): each by its position, as
/// its bytes (escaped), and the flag it is the value of.
fn not_utf8(args: impl Iterator<Item = std::ffi::OsString>) -> String {
    let args: Vec<std::ffi::OsString> = args.collect();
    let named: Vec<String> = args
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, a)| a.to_str().is_none())
        .map(|(i, a)| {
            let bytes = a.as_encoded_bytes();
            let shown = bytes.escape_ascii().to_string();
            let shown = lab::clip(&shown);
            let flag = args
                .get(i - 1)
                .and_then(|p| p.to_str())
                .filter(|p| p.starts_with('-') && !bytes.starts_with(b"-"));
            match flag {
                Some(f) => format!("argument {i} ('{shown}', the value of {})", lab::clip(f)),
                None => format!("argument {i} ('{shown}')"),
            }
        })
        .collect();
    if named.is_empty() {
        return "an argument is not valid UTF-8".into();
    }
    format!(
        "{} not valid UTF-8 text: give it as UTF-8",
        if named.len() == 1 {
            format!("{} is", named[0])
        } else {
            format!("{} are", named.join(", "))
        }
    )
}

fn main() {
    let args = cli::Cli::try_parse().unwrap_or_else(|e| refuse_command_line(e));
    // A testing knob: the documents' commands are parsed by the test suite without being run
    // (tests/it/ci_doc.rs); nothing is read or written.
    if std::env::var_os("TAILSCOPE_TEST_PARSE_ONLY").is_some_and(|v| v == "1") {
        std::process::exit(0);
    }
    // Output still buffered is part of the command: failing to write it fails the command.
    let done = cmd::dispatch(args).and_then(|code| {
        output::flush_stdout()?;
        Ok(code)
    });
    let code = match done {
        Ok(code) => code,
        // Nobody reads the rest: not a failure (see `output::StdoutClosed`).
        Err(e) if output::closed_stdout(&e) => 0,
        Err(e) => {
            let code = exit::code_of(&e);
            // One clear line naming the problem (the chain of causes joined on that line).
            eprintln!("tailscope: {}", exit::one_line(&exit::message(&e)));
            code
        }
    };
    std::process::exit(code);
}
