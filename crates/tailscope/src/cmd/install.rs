//! `tailscope completions SHELL` and `tailscope man [--out DIR]`: what a packager or
//! `cargo install` user needs beside the binary, generated from the same clap definitions as
//! the command line itself (`cli.rs`), so they cannot drift from it.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::exit::usage;
use crate::output;

pub fn completions(a: &CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "tailscope", &mut buf);
    output::print_with(|w| w.write_all(&buf))?;
    Ok(0)
}

pub fn man(a: &ManArgs) -> anyhow::Result<i32> {
    let cmd = Cli::command();
    match &a.out {
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut buf)
                .context("cannot render the man page")?;
            output::print_with(|w| w.write_all(&buf))?;
        }
        Some(dir) => write_pages(cmd, dir)?,
    }
    Ok(0)
}

/// tailscope.1 and one page per subcommand into `dir`, which must be an existing directory.
fn write_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Err(usage(format!(
            "--out {} is not an existing directory",
            dir.display()
        )));
    }
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
    Ok(())
}
