//! The agent processes as the coordinator holds them: each started from its command line
//! (the user's own remote execution: ssh, `ip netns exec`, `kubectl exec -i`, or this binary),
//! in a process group of its own so that a terminal's Ctrl-C reaches only the coordinator
//! (which then stops every agent in order, keeping what they measured). One thread per agent
//! reads its stdout into events (decoding and checking each frame there, errors naming the
//! agent), one forwards its stderr line by line and keeps the last lines for error messages.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, BufWriter};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use store::Columns;

use crate::frame::{self, read_frame, write_frame, FrameError, Kind, Reader};
use crate::hist::Interval;
use crate::job::{Done, Hello};
use crate::Launch;

/// Lines of an agent's stderr kept for the message when it fails.
const TAIL_LINES: usize = 6;
/// Records a chunk frame may announce (the engine sends 8192).
const MAX_CHUNK_RECORDS: u32 = 1 << 20;

/// A decoded frame from an agent.
pub enum Msg {
    Hello(Hello),
    Pong {
        seq: u64,
        t1: u64,
        t2: u64,
        t3: u64,
    },
    Progress {
        done: u64,
        total: u64,
    },
    Interval(Box<Interval>),
    Chunk {
        thread: u32,
        seq: u32,
        cols: Columns,
    },
    Done(Box<Done>),
    Error(String),
}

/// What an agent's reader saw: a frame (with the coordinator's clock when it was read), the
/// end of its output, or bytes that are not the protocol.
pub struct Event {
    pub agent: usize,
    pub at_ns: u64,
    pub what: Result<Option<Msg>, String>,
}

fn decode(kind: Kind, p: &[u8]) -> Result<Msg, FrameError> {
    Ok(match kind {
        Kind::Hello => Msg::Hello(frame::from_json(kind, p)?),
        Kind::Error => {
            let v: serde_json::Value = frame::from_json(kind, p)?;
            Msg::Error(v["message"].as_str().unwrap_or("(no message)").to_string())
        }
        Kind::Pong => {
            let mut r = Reader::new(kind, p);
            let m = Msg::Pong {
                seq: r.u64()?,
                t1: r.u64()?,
                t2: r.u64()?,
                t3: r.u64()?,
            };
            r.end()?;
            m
        }
        Kind::Progress => {
            let mut r = Reader::new(kind, p);
            let m = Msg::Progress {
                done: r.u64()?,
                total: r.u64()?,
            };
            r.end()?;
            m
        }
        Kind::Interval => Msg::Interval(Box::new(Interval::from_payload(p)?)),
        Kind::Chunk => {
            let mut r = Reader::new(kind, p);
            let (thread, seq, len) = (r.u32()?, r.u32()?, r.u32()?);
            if len > MAX_CHUNK_RECORDS {
                return Err(FrameError::payload(
                    kind,
                    format!("{len} records in one chunk"),
                ));
            }
            let cols = store::decode_chunk(r.rest(), len as usize)
                .map_err(|e| FrameError::payload(kind, e))?;
            // Records the analysis could not read back are refused now, naming the agent.
            crate::columns::from_columns(&cols).map_err(|e| FrameError::payload(kind, e))?;
            Msg::Chunk { thread, seq, cols }
        }
        Kind::Done => Msg::Done(Box::new(frame::from_json(kind, p)?)),
        Kind::Ping | Kind::Start | Kind::Stop => {
            return Err(FrameError::payload(
                kind,
                "only the coordinator sends these",
            ))
        }
    })
}

struct Proc {
    child: Option<Child>,
    stdin: Option<BufWriter<ChildStdin>>,
    tail: Arc<Mutex<VecDeque<String>>>,
}

/// The started agents and the one channel their readers feed.
pub struct Fleet {
    procs: Vec<Proc>,
    rx: Receiver<Event>,
}

impl Fleet {
    /// Starts every agent; an agent that cannot be started is reported as an event (it
    /// fails the run like one that dies, naming it).
    pub fn spawn(cmds: &[Launch]) -> Fleet {
        let (tx, rx) = mpsc::channel();
        let procs = cmds
            .iter()
            .enumerate()
            .map(|(i, c)| start(i, c, &tx))
            .collect();
        Fleet { procs, rx }
    }

    /// Sends one frame to agent `i`; an error when its stdin is closed or gone.
    pub fn send(&mut self, i: usize, kind: Kind, payload: &[u8]) -> Result<(), String> {
        let Some(w) = self.procs.get_mut(i).and_then(|p| p.stdin.as_mut()) else {
            return Err("its input is closed".into());
        };
        write_frame(w, kind, payload).map_err(|e| format!("writing to it: {e}"))
    }

    /// The next event, waiting at most `timeout`; None on timeout (or when no reader is
    /// left, which the caller sees as every agent having ended).
    pub fn recv(&self, timeout: Duration) -> Option<Event> {
        match self.rx.recv_timeout(timeout) {
            Ok(e) => Some(e),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Agent `i`'s last stderr lines, joined (for an error message).
    pub fn tail(&self, i: usize) -> String {
        let Some(p) = self.procs.get(i) else {
            return String::new();
        };
        let t = p.tail.lock().unwrap_or_else(|e| e.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// How agent `i` ended, if it has: "exit status 1", "killed by signal 9".
    pub fn exit_status(&mut self, i: usize) -> Option<String> {
        let child = self.procs.get_mut(i)?.child.as_mut()?;
        let st = child.try_wait().ok()??;
        use std::os::unix::process::ExitStatusExt;
        Some(match (st.code(), st.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => st.to_string(),
        })
    }

    /// Closes agent `i`'s stdin: a running agent reads that as "stop", an idle one ends.
    pub fn close(&mut self, i: usize) {
        if let Some(p) = self.procs.get_mut(i) {
            p.stdin = None;
        }
    }

    /// Kills agent `i`'s process (the command the user gave: ssh, kubectl, …).
    pub fn kill(&mut self, i: usize) {
        if let Some(c) = self.procs.get_mut(i).and_then(|p| p.child.as_mut()) {
            let _ = c.kill();
        }
    }

    /// Waits up to `grace` for every agent to exit after its stdin is closed, then kills
    /// what is left and reaps everything.
    pub fn finish(&mut self, grace: Duration) {
        for i in 0..self.procs.len() {
            self.close(i);
        }
        let deadline = std::time::Instant::now() + grace;
        for p in &mut self.procs {
            let Some(mut c) = p.child.take() else {
                continue;
            };
            while std::time::Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Fleet {
    /// No agent outlives the coordinator's run, whatever ended it.
    fn drop(&mut self) {
        self.finish(Duration::from_millis(500));
    }
}

fn start(i: usize, c: &Launch, tx: &Sender<Event>) -> Proc {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let fail = |e: String| {
        let _ = tx.send(Event {
            agent: i,
            at_ns: host::tstamp::mono_now_ns(),
            what: Err(e),
        });
        Proc {
            child: None,
            stdin: None,
            tail: Arc::clone(&tail),
        }
    };
    let mut cmd = Command::new(&c.argv[0]);
    cmd.args(&c.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(ch) => ch,
        Err(e) => return fail(format!("could not start `{}`: {e}", c.argv[0])),
    };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return fail("its standard streams could not be piped".into());
    };
    let out_tx = tx.clone();
    let reader = std::thread::Builder::new()
        .name(format!("tailscope-agent{}-out", i + 1))
        .spawn(move || {
            let mut r = BufReader::with_capacity(1 << 16, stdout);
            loop {
                let got = read_frame(&mut r);
                let at_ns = host::tstamp::mono_now_ns();
                let (what, last) = match got {
                    Ok(Some((kind, p))) => match decode(kind, &p) {
                        Ok(m) => (Ok(Some(m)), false),
                        Err(e) => (Err(e.to_string()), true),
                    },
                    Ok(None) => (Ok(None), true),
                    Err(e) => (Err(e.to_string()), true),
                };
                let gone = out_tx.send(Event {
                    agent: i,
                    at_ns,
                    what,
                });
                if last || gone.is_err() {
                    break;
                }
            }
        });
    if let Err(e) = reader {
        let _ = child.kill();
        let _ = child.wait();
        return fail(format!("no thread to read it: {e}"));
    }
    let label = format!("[agent {} {}]", i + 1, c.label);
    let keep = Arc::clone(&tail);
    // Best effort: without the forwarder the agent's stderr is lost, not the run.
    let _ = std::thread::Builder::new()
        .name(format!("tailscope-agent{}-err", i + 1))
        .spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("{label} {line}");
                let mut t = keep.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    Proc {
        child: Some(child),
        stdin: Some(BufWriter::new(stdin)),
        tail,
    }
}

/// The tail joined into a message suffix.
pub fn with_tail(msg: String, tail: &str) -> String {
    if tail.is_empty() {
        msg
    } else {
        format!("{msg}; its last words: {tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_and_a_dead_command_are_events_naming_nothing_but_what_happened() {
        let sh = |s: &str| Launch {
            label: s.into(),
            argv: vec!["sh".into(), "-c".into(), s.into()],
        };
        let cmds = [
            sh("echo Welcome to the box"),
            sh("exit 3"),
            Launch {
                label: "nope".into(),
                argv: vec!["/nonexistent/tailscope".into()],
            },
        ];
        let mut f = Fleet::spawn(&cmds);
        let mut seen = [None, None, None];
        while seen.iter().any(Option::is_none) {
            let e = f.recv(Duration::from_secs(10)).expect("an event per agent");
            seen[e.agent] = Some(e.what.map(|m| m.is_some()));
        }
        assert!(matches!(&seen[0], Some(Err(m)) if m.contains("Welcome")));
        assert!(matches!(&seen[1], Some(Ok(false))), "a clean end of output");
        assert!(matches!(&seen[2], Some(Err(m)) if m.contains("could not start")));
        let mut status = None;
        for _ in 0..500 {
            status = f.exit_status(1);
            if status.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(status.as_deref(), Some("exit status 3"));
        f.finish(Duration::from_secs(1));
    }
}
