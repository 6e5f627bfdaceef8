//! What the integration tests that drive the real binary share.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The tailscope binary, with no store location inherited from the environment.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tailscope"));
    c.env_remove("TAILSCOPE_DB");
    c
}

/// The whole binary's gate. Every test that starts processes holds it: shared by most, so two
/// run at once on the two CPUs (libtest's two threads); alone by the few whose assertion is an
/// absolute figure of the host (a calibrated service time, a small effect's direction), which
/// another test's load would move. std's RwLock lets no new reader in while a writer waits,
/// so an `alone` test waits only for the test running beside it.
static GATE: RwLock<()> = RwLock::new(());

/// A test's turn: its place at the gate and, for [`one_at_a_time`], its module's lock. The
/// fields drop in order: the module's lock, then the gate.
pub struct Turn {
    _module: Option<MutexGuard<'static, ()>>,
    _gate: Gate,
}

thread_local! {
    /// Whether this thread (libtest runs each test on its own) holds a turn. A second turn
    /// would take the gate twice, and a writer waiting between the two reads deadlocks both.
    static HOLDS_A_TURN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Drop for Turn {
    fn drop(&mut self) {
        HOLDS_A_TURN.set(false);
    }
}

enum Gate {
    Shared(RwLockReadGuard<'static, ()>),
    Alone(RwLockWriteGuard<'static, ()>),
}

/// Holds the gate shared: the test may run beside one other.
pub fn shared() -> Turn {
    waited(|| Turn {
        _module: None,
        _gate: Gate::Shared(GATE.read().unwrap_or_else(|e| e.into_inner())),
    })
}

/// Holds the gate alone: no other test runs processes meanwhile.
pub fn alone() -> Turn {
    waited(|| Turn {
        _module: None,
        _gate: Gate::Alone(GATE.write().unwrap_or_else(|e| e.into_inner())),
    })
}

/// Holds the gate shared and takes a module's one-load-at-a-time lock (its tests' loads
/// would collide: the same fixed resources, or each other's noise), in that order, so that no
/// two tests can each hold what the other waits for.
pub fn one_at_a_time(lock: &'static Mutex<()>) -> Turn {
    waited(|| {
        let gate = Gate::Shared(GATE.read().unwrap_or_else(|e| e.into_inner()));
        Turn {
            _module: Some(lock.lock().unwrap_or_else(|e| e.into_inner())),
            _gate: gate,
        }
    })
}

/// Takes a turn, and appends how long the test waited for it, with the test's name (libtest
/// names the test's thread after it), to the file TAILSCOPE_TEST_WAITS names, when it does:
/// that is how scripts/test.sh lists the slowest tests by their own time, waits excluded.
fn waited(take: impl FnOnce() -> Turn) -> Turn {
    assert!(
        !HOLDS_A_TURN.replace(true),
        "a test takes one turn (shared, alone or one_at_a_time), not two"
    );
    let asked = Instant::now();
    let turn = take();
    if let Some(path) = std::env::var_os("TAILSCOPE_TEST_WAITS") {
        use std::io::Write;
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let line = format!("{name}\t{:.3}\n", asked.elapsed().as_secs_f64());
        // One write of a short line to a file opened for appending: lines from tests running
        // at once do not interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
    turn
}

/// The run sent its offered load: achieved within 1 % of the schedule's rate.
pub fn assert_offered_sent(v: &serde_json::Value) {
    let offered = v["throughput"]["offered_rps"].as_f64().unwrap();
    let achieved = v["achieved_rate_rps"].as_f64().unwrap();
    assert!(
        (achieved / offered - 1.0).abs() < 0.01,
        "achieved {achieved} of {offered}"
    );
}

/// What a command printed on stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one JSON object a command printed on stdout.
pub fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `tailscope runs list --json` of a store.
pub fn runs_list(db: &Path) -> serde_json::Value {
    json_of(
        &bin()
            .args(["runs", "list", "--json", "--db"])
            .arg(db)
            .output()
            .unwrap(),
    )
}

/// Starts `tailscope run ARGS --db DB --json`, kills `server` after `after`, and checks what
/// must follow: exit 1, status `failed`, requests measured before the kill, the run stored as
/// failed. Returns the run's JSON.
pub fn run_with_server_killed(
    args: &[&str],
    db: &Path,
    server: &mut Child,
    after: Duration,
) -> serde_json::Value {
    let run = bin()
        .arg("run")
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    server.kill().unwrap();
    let _ = server.wait();
    let out = run.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["status"], "failed");
    assert!(
        v["outcomes"]["ok"].as_u64().unwrap() > 0,
        "it measured before the kill"
    );
    assert_eq!(runs_list(db)["runs"][0]["status"], "failed");
    v
}

/// A `tailscope serve` process and its bound address; killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tailscope serve --listen 127.0.0.1:0 ARGS` and waits for its bound address.
pub fn serve(args: &[&str]) -> Served {
    serve_at("127.0.0.1:0", args)
}

/// Starts `tailscope serve --listen LISTEN ARGS` (a loopback address; port 0 for any) and
/// waits for its bound address.
pub fn serve_at(listen: &str, args: &[&str]) -> Served {
    let mut child = bin()
        .arg("serve")
        .args(["--listen", listen])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tailscope serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "serve printed '{addr}'");
    Served { child, addr }
}
