//! Load from many client hosts: `tailscope agent` processes, each started through the user's
//! own remote execution (a command line per agent: `ssh host1 tailscope agent`, `ip netns exec
//! ns1 tailscope agent`, `kubectl exec -i pod-1 -- tailscope agent`, or `local`: this binary),
//! driven over its stdin and stdout — no daemon, no port.
//!
//! ```text
//! coordinator ── hello, 16 clock pings, start(share i of n, common start) ──► agent i
//!             ◄── per-interval histograms, raw record chunks, progress, done ──
//! ```
//!
//! The coordinator measures each agent's clock offset over that same channel ([`clock`]),
//! announces one start; each agent converts it to its own CLOCK_MONOTONIC and sends its lanes
//! of the one schedule (`load::LoadConfig::share`: Poisson split exactly, other processes
//! dealt), measuring every latency from its own intended times. Their histograms are *added*
//! ([`hist`]); their records are stored as one run, each agent's threads their own chunk
//! streams, so the analysis' merge by intended time sees the whole arrival stream, and the
//! ideal is computed on it. An agent that dies fails the run, naming it, with what arrived
//! kept. [`serve()`] is the agent's side; `measure` dispatches here for a plan with agents.

mod clock;
mod coord;
mod fleet;
mod frame;
mod hist;
mod job;
mod report;
mod serve;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{invalid, LabError};

pub use clock::ClockOffset;
pub use report::{AgentClock, AgentReport, AgentsReport};
pub use serve::serve;

pub(crate) use report::measure;

/// Most agents one run drives (each is a process, two threads and a pipe here).
pub const MAX_AGENTS: usize = 256;

/// One agent: what the user wrote and the program and arguments it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AgentCommand {
    /// How the run names it: the name from the agents file, else the command as written.
    pub label: String,
    pub argv: Vec<String>,
}

/// The agents of a run, validated.
#[derive(Clone, Debug, Serialize)]
pub struct Agents {
    pub commands: Vec<AgentCommand>,
    /// Stream every request's record (the exact distribution, the ideal, the server's view,
    /// stages); off: histograms only.
    pub records: bool,
    /// Time from the start announcement to the common start: every agent opens its
    /// connections in it.
    pub lead: Duration,
}

impl Agents {
    /// Checks the list (1 to [`MAX_AGENTS`]).
    pub fn new(commands: Vec<AgentCommand>, records: bool) -> Result<Agents, LabError> {
        if commands.is_empty() {
            return Err(invalid("--agent: at least one agent is needed"));
        }
        if commands.len() > MAX_AGENTS {
            return Err(invalid(format!(
                "--agent: at most {MAX_AGENTS} agents, got {}",
                commands.len()
            )));
        }
        Ok(Agents {
            commands,
            records,
            lead: Duration::from_secs(1),
        })
    }
}

impl AgentCommand {
    /// `local` (this binary, `self_exe agent`) or a command line, split as a shell would
    /// split words (quotes and backslashes; no shell runs it) and checked: its program must
    /// be an executable here.
    pub fn parse(text: &str, self_exe: &Path) -> Result<AgentCommand, LabError> {
        let t = text.trim();
        if t == "local" {
            return Ok(AgentCommand {
                label: "local".into(),
                argv: vec![self_exe.to_string_lossy().into_owned(), "agent".into()],
            });
        }
        let argv = split_words(t).map_err(|m| invalid(format!("--agent '{text}': {m}")))?;
        let Some(program) = argv.first() else {
            return Err(invalid("--agent: an empty command line"));
        };
        if !is_executable(program) {
            return Err(invalid(format!(
                "--agent '{text}': no program '{program}' here (not an executable on PATH)"
            )));
        }
        Ok(AgentCommand {
            label: t.to_string(),
            argv,
        })
    }
}

/// An agents file: `[[agent]]` tables with a `command` and an optional `name`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    agent: Vec<FileAgent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAgent {
    command: String,
    name: Option<String>,
}

/// The agents listed in a TOML file, each checked as [`AgentCommand::parse`] checks one.
pub fn agents_file(path: &Path, self_exe: &Path) -> Result<Vec<AgentCommand>, LabError> {
    let p = path.display();
    let text =
        crate::experiment::read_bounded(path, crate::experiment::MAX_EXPERIMENT_BYTES, "--agents")?;
    let file: AgentsFile = toml::from_str(&text).map_err(|e| {
        invalid(crate::experiment::toml_message(
            &format!("--agents {p}"),
            &text,
            &e,
            None,
        ))
    })?;
    file.agent
        .into_iter()
        .map(|a| {
            let mut c = AgentCommand::parse(&a.command, self_exe)
                .map_err(|e| invalid(format!("--agents {p}: {e}")))?;
            if let Some(n) = a.name.filter(|n| !n.trim().is_empty()) {
                c.label = n;
            }
            Ok(c)
        })
        .collect()
}

fn is_executable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let ok = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return ok(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| ok(&d.join(program))))
}

/// Words as a POSIX shell splits them: blanks separate, `'…'` is literal, `"…"` honours `\"`
/// and `\\`, a backslash outside quotes escapes the next character. Unquoted shell operators
/// are refused: no shell runs the command, so they would be passed on as arguments.
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(cur.take()),
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => w.push(x),
                        None => return Err("unterminated ' quote".into()),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => w.push(x),
                            Some(x) => {
                                w.push('\\');
                                w.push(x);
                            }
                            None => return Err("unterminated \" quote".into()),
                        },
                        Some(x) => w.push(x),
                        None => return Err("unterminated \" quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(x) => cur.get_or_insert_with(String::new).push(x),
                None => return Err("a trailing backslash".into()),
            },
            '|' | ';' | '&' | '<' | '>' | '`' | '$' | '(' | ')' => {
                return Err(format!(
                    "'{c}' is shell syntax, and no shell runs agent commands (wrap it: sh -c '…')"
                ))
            }
            '\0' => return Err("a NUL byte".into()),
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(cur);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell() {
        let w = split_words(r#"kubectl exec -i pod-1 -- tailscope agent"#).unwrap();
        assert_eq!(
            w,
            ["kubectl", "exec", "-i", "pod-1", "--", "tailscope", "agent"]
        );
        let w = split_words(r#"ssh -o 'Opt=a b' "host\"1" x\ y ''"#).unwrap();
        assert_eq!(w, ["ssh", "-o", "Opt=a b", "host\"1", "x y", ""]);
        assert!(split_words("ssh 'host")
            .unwrap_err()
            .contains("unterminated"));
        assert!(split_words("ssh host tailscope agent | tee log")
            .unwrap_err()
            .contains("shell syntax"));
        assert!(split_words("sh -c 'exec tailscope agent > /dev/null'").is_ok());
    }

    #[test]
    fn agents_are_checked_before_anything_starts() {
        let me = Path::new("/usr/bin/tailscope");
        let local = AgentCommand::parse("local", me).unwrap();
        assert_eq!(local.argv, ["/usr/bin/tailscope", "agent"]);
        let sh = AgentCommand::parse("sh -c 'exec cat'", me).unwrap();
        assert_eq!(sh.argv, ["sh", "-c", "exec cat"]);
        assert!(AgentCommand::parse("", me).is_err());
        let e = AgentCommand::parse("no-such-program-here host agent", me).unwrap_err();
        assert!(e.to_string().contains("no-such-program-here"), "{e}");
        assert!(Agents::new(Vec::new(), true).is_err());
        assert!(Agents::new(vec![local; MAX_AGENTS + 1], true).is_err());
    }

    #[test]
    fn an_agents_file_lists_commands_and_names() {
        let dir = tempfile::tempdir().unwrap();
        let me = Path::new("/usr/bin/tailscope");
        let f = dir.path().join("agents.toml");
        std::fs::write(
            &f,
            "[[agent]]\ncommand = \"local\"\n\n[[agent]]\ncommand = \"sh -c 'exec tailscope agent'\"\nname = \"box2\"\n",
        )
        .unwrap();
        let a = agents_file(&f, me).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].label, "box2");
        std::fs::write(&f, "[[agent]]\ncommand = \"local\"\nhost = \"x\"\n").unwrap();
        let e = agents_file(&f, me).unwrap_err().to_string();
        assert!(e.contains("host"), "{e}");
        std::fs::write(&f, "[[agent]]\ncommand = \"nosuchprog agent\"\n").unwrap();
        assert!(agents_file(&f, me).is_err());
        assert!(agents_file(&dir.path().join("missing.toml"), me).is_err());
    }
}
