//! Runs whose agents are other "hosts": network namespaces this test makes (veth pairs to the
//! server's namespace, removed whatever happens), agents launched with `ip netns exec`; and
//! the SSH launcher end to end, Debian's sshd started by the test inside a namespace with keys
//! it generates. Needs root, iproute2 and openssh (scripts/test.sh installs them): a missing
//! one fails the test, it never skips.

use crate::agents_support;
use crate::common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use agents_support::{
    assert_agents_add_up, assert_percentiles_match_records, ip, serve, unique, Netns,
};
use common::{bin, json_of};

static SERIAL: Mutex<()> = Mutex::new(());

const EXE: &str = env!("CARGO_BIN_EXE_tailscope");

/// A run from `agents` that must succeed. Its lateness threshold is 1 s: the plumbing is under
/// test here (namespaces, ssh, the merge), not how punctual agents are on a host whose two CPUs
/// they share with the server, the coordinator and whatever else runs (the loopback
/// acceptance test in agents_cli.rs holds them to 5 ms).
fn run(target: &str, rate: &str, agents: &[String], db: &Path) -> serde_json::Value {
    let mut c = bin();
    c.args(["run", target, "--rate", rate, "--duration", "3s"])
        .args([
            "--warmup",
            "500ms",
            "--service",
            "10us",
            "--connections",
            "4",
        ])
        .args(["--lateness-threshold", "1s", "--db"])
        .arg(db)
        .arg("--json");
    for a in agents {
        c.args(["--agent", a]);
    }
    let out = c.output().unwrap();
    let v = json_of(&out);
    assert_eq!(
        v["status"],
        "ok",
        "{v}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

#[test]
fn three_client_namespaces_send_their_shares_and_merge_into_one_run() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // The server's namespace holds 10.201.0.1; client i reaches it over its own veth pair
    // (10.201.i.0/24).
    let mut ns = Netns::new();
    let srv = unique("s");
    ns.add(&srv);
    ip(&["-n", &srv, "addr", "add", "10.201.0.1/32", "dev", "lo"]);
    let mut agents = Vec::new();
    for i in 1..=3 {
        let c = unique(&format!("c{i}"));
        ns.add(&c);
        ns.veth(
            &unique(&format!("v{i}")),
            Some(&srv),
            &format!("10.201.{i}.1/24"),
            &c,
            &format!("10.201.{i}.2/24"),
        );
        let via = format!("10.201.{i}.1");
        ip(&["-n", &c, "route", "add", "10.201.0.1/32", "via", &via]);
        agents.push(format!("ip netns exec {c} {EXE} agent"));
    }
    let s = serve("0.0.0.0:0", Some(&srv));
    let target = format!("nullrpc://10.201.0.1:{}", s.port);
    let v = run(&target, "3000", &agents, &db);
    assert_agents_add_up(&v, 3, 3000.0);
    for a in v["agents"].as_array().unwrap() {
        assert_eq!(a["status"], "ok", "{a}");
        // A network namespace shares the host's clock.
        assert_eq!(a["clock"], "shared");
    }
    assert_percentiles_match_records(&v, &db);
}

/// sshd inside a namespace, in the foreground, killed when dropped.
struct Sshd(Child);

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen (Debian: openssh-client)");
    assert!(st.success(), "ssh-keygen failed");
}

#[test]
fn an_agent_over_ssh_runs_its_share_end_to_end() {
    let _g = common::one_at_a_time(&SERIAL);
    let sshd_bin = Path::new("/usr/sbin/sshd");
    assert!(
        sshd_bin.exists(),
        "/usr/sbin/sshd is missing: install openssh-server (scripts/test.sh does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("runs.db");
    // The "remote host" is a namespace joined to this one by a veth pair; the server listens
    // here, on this side of it.
    let mut ns = Netns::new();
    let host = unique("h");
    ns.add(&host);
    ns.veth(&unique("vh"), None, "10.202.0.1/24", &host, "10.202.0.2/24");
    let s = serve("10.202.0.1:0", None);

    keygen(&d.join("host_key"));
    keygen(&d.join("client_key"));
    std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
    let config = d.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port 2222\nListenAddress 10.202.0.2\nHostKey {h}\nAuthorizedKeysFile {a}\n\
             PidFile {p}\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nLogLevel ERROR\n",
            h = d.join("host_key").display(),
            a = d.join("authorized_keys").display(),
            p = d.join("sshd.pid").display(),
        ),
    )
    .unwrap();
    // sshd's privilege separation directory, as its package's service would make it.
    std::fs::create_dir_all("/run/sshd").unwrap();
    let _sshd = Sshd(
        Command::new("ip")
            .args(["netns", "exec", &host])
            .arg(sshd_bin)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            // It would only report the readiness probe's bare connection below.
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd"),
    );
    let addr: SocketAddr = "10.202.0.2:2222".parse().unwrap();
    let up = (0..200).any(|_| {
        TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() || {
            std::thread::sleep(Duration::from_millis(50));
            false
        }
    });
    assert!(up, "sshd did not listen on {addr}");

    let ssh = format!(
        "ssh -i {} -p 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
         -o BatchMode=yes -o LogLevel=ERROR root@10.202.0.2 {EXE} agent",
        d.join("client_key").display()
    );
    let target = format!("nullrpc://10.202.0.1:{}", s.port);
    let v = run(&target, "2000", &[ssh.clone(), "local".into()], &db);
    assert_agents_add_up(&v, 2, 2000.0);
    let a = &v["agents"][0];
    assert_eq!(a["command"], ssh.as_str());
    assert_eq!(a["status"], "ok", "{a}");
    assert!(a["min_rtt_ns"].as_u64().unwrap() > 0);
    assert_percentiles_match_records(&v, &db);
}
