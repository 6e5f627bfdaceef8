//! `tailscope agent`: the load part of a run on another host. The coordinator (`run
//! --agent`) starts it through the user's remote execution and drives it over stdin and
//! stdout; all of it is `lab::agents::serve`. Logs go to stderr: stdout carries frames only.

use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal};
use std::os::fd::AsFd;

use anyhow::Context;

use crate::exit::usage;

pub fn run() -> anyhow::Result<i32> {
    if std::io::stdin().is_terminal() {
        return Err(usage(
            "tailscope agent speaks a binary protocol on stdin/stdout and is started by a coordinator: tailscope run TARGET --agent 'ssh HOST tailscope agent' …",
        ));
    }
    // Raw descriptors: std's stdout is line-buffered, and nothing but frames may reach it.
    let input = File::from(
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .context("stdin")?,
    );
    let output = File::from(
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("stdout")?,
    );
    lab::agents::serve(
        BufReader::with_capacity(1 << 16, input),
        BufWriter::with_capacity(1 << 16, output),
    )?;
    Ok(0)
}
