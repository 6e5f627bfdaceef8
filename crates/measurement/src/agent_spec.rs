//! What a run with agents is asked and what it says of them: the agents' command lines
//! (checked before anything starts) and their report in the run. The types only — the
//! agents' protocol and the coordinator are in [`crate::agents`], which sends the load
//! through them; `measure` and `Run` name these types without depending on it.

use std::path::Path;
use std::time::Duration;

use analysis::Outcomes;
use serde::{Deserialize, Serialize};
use stats::{Distribution, DistributionCi};

use crate::error::{invalid, LabError};

/// Most agents one run drives (each is a process, two threads and a pipe here).
pub const MAX_AGENTS: usize = 256;

/// One agent: what the user wrote and the program and arguments it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCommand {
    /// How the run names it: the name from the agents file, else the command as written.
    pub label: String,
    pub argv: Vec<String>,
}

/// The agents of a run, validated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

impl Agents {
    /// The agents a command's `--agent CMD` (repeatable) and `--agents FILE` name, checked
    /// before anything starts (None: neither was given, the load runs in this process).
    /// `local` is this very binary.
    pub fn from_args(
        commands: &[String],
        file: Option<&Path>,
        records: bool,
    ) -> Result<Option<Agents>, LabError> {
        if commands.is_empty() && file.is_none() {
            return Ok(None);
        }
        let me = std::env::current_exe()
            .map_err(|e| invalid(format!("--agent: this program's path: {e}")))?;
        let mut cmds = Vec::new();
        if let Some(f) = file {
            cmds.extend(agents_file(f, &me)?);
        }
        for t in commands {
            cmds.push(AgentCommand::parse(t, &me)?);
        }
        Agents::new(cmds, records).map(Some)
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
        crate::input_file::read_bounded(path, crate::input_file::MAX_EXPERIMENT_BYTES, "--agents")?;
    let file: AgentsFile = toml::from_str(&text).map_err(|e| {
        invalid(crate::input_file::toml_message(
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

/// One agent of a run, as the run's JSON shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentReport {
    /// 1-based, in the order given.
    pub agent: usize,
    /// The command line as given ("local" for this binary), or its name in the agents file.
    pub command: String,
    pub host: Option<String>,
    pub status: AgentStatus,
    pub error: Option<String>,
    /// Its measured requests (after the warm-up); the agents' add up to the run's.
    pub requests: u64,
    pub outcomes: Outcomes,
    pub achieved_rate_rps: f64,
    /// Its share of the offered rate.
    pub offered_rate_rps: f64,
    pub lateness_p99_us: Option<f64>,
    /// Its latency distribution, from its own histograms (µs).
    pub measured: Option<Distribution>,
    /// The offset its start was converted with (agent − coordinator), what the pings
    /// measured, and the bound on their error; `clock` is `shared` when it reads this host's
    /// very clock (the applied offset is then exactly 0).
    pub offset_ns: Option<i64>,
    pub measured_offset_ns: Option<i64>,
    pub uncertainty_ns: Option<u64>,
    pub min_rtt_ns: Option<u64>,
    pub clock: AgentClock,
    /// Raw records it sent and the coordinator stored.
    pub records: u64,
}

/// How one agent's share of a run went (serialised in lowercase).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    /// It sent its share on schedule.
    Ok,
    /// It fell behind its schedule: the user's view is invalid.
    Late,
    /// It died, disconnected, hung or sent garbage: the run failed.
    Failed,
    /// The run was stopped.
    Interrupted,
}

impl AgentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Ok => "ok",
            AgentStatus::Late => "late",
            AgentStatus::Failed => "failed",
            AgentStatus::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Where an agent's clock offset came from (serialised `shared` or `measured`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentClock {
    /// It reads this host's very clock: the applied offset is exactly 0.
    Shared,
    /// Measured by the pings over the agent's channel.
    Measured,
}

/// The agents' histograms added up: `--json`'s `agents_merged`,
/// `{"requests", "measured", "measured_ci", "lateness"}`, latencies in µs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentsMerged {
    /// Requests the agents sent, all told.
    pub requests: u64,
    /// Latency (the user's view) of the added histograms.
    pub measured: Distribution,
    pub measured_ci: DistributionCi,
    /// Lateness against the schedule of the added histograms; `None` when none was recorded.
    pub lateness: Option<Distribution>,
}

/// The agents of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentsReport {
    pub agents: Vec<AgentReport>,
    /// Raw records were streamed and stored (the run's figures come from them).
    pub records: bool,
    /// The run's latency and lateness from every agent's histograms added up (beside the
    /// exact figures from the records when they were kept); `None` when no agent measured a
    /// request.
    pub merged: Option<AgentsMerged>,
    /// What is missing without records.
    pub missing: Option<String>,
    /// Why the run failed, naming the agents.
    pub error: Option<String>,
    /// What the coordinator decided for the agents (e.g. that agents sharing this host's
    /// CPUs sleep between far sends rather than spin).
    pub notes: Vec<String>,
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
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
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
