//! Issue 38: gRPC unary calls (`grpc://`, `grpcs://`) against a real gRPC server, PyPI's
//! grpcio (`grpc/echo_server.py`, run by the test virtual environment's Python): the request
//! message from JSON through a `.proto`, or as protobuf bytes; non-OK statuses counted by
//! code; bad input refused before anything starts. A missing grpcio fails these tests under
//! CI; it never skips them there.

use crate::browser::grpc_python;
use crate::common;
use crate::tls_cli::private_ca_certificate;

use common::{bin, json_of};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;

/// One at a time: these tests share two CPUs with the server they start.
static SERIAL: Mutex<()> = Mutex::new(());

fn here(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/grpc")
        .join(file)
}

/// grpcio's server on CPU 1, plaintext or (with a directory holding `cert.pem` and
/// `key.pem`) over TLS; killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(python: &Path, tls: Option<&Path>) -> Server {
        let mut c = Command::new("taskset");
        c.args(["-c", "1"]).arg(python).arg(here("echo_server.py"));
        // grpcio logs a refused handshake at INFO; the test says what it expects itself.
        c.env("GRPC_VERBOSITY", "ERROR");
        if let Some(d) = tls {
            c.arg("--tls")
                .arg(d.join("cert.pem"))
                .arg(d.join("key.pem"));
        }
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        BufReader::new(out).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the gRPC server printed {line:?}, not its port"));
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(url: &str, extra: &[&str], db: &Path) -> Output {
    bin()
        .args([
            "run",
            url,
            "--cpus",
            "0",
            "--duration",
            "1s",
            "--rate",
            "800",
        ])
        .args([
            "--arrival",
            "det",
            "--warmup",
            "300ms",
            "--connections",
            "2",
        ])
        .args(["--no-noise-probe", "--json", "--db"])
        .arg(db)
        .args(extra)
        .output()
        .unwrap()
}

use common::stderr;

/// A measured gRPC run: every call answered OK, the offered load sent.
fn assert_all_ok(out: &Output) -> serde_json::Value {
    let v = json_of(out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(out));
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert!(v["outcomes"]["ok"].as_u64().unwrap() > 500, "{v}");
    assert_eq!(v["error_codes"], serde_json::json!({}), "{v}");
    assert_eq!(v["connection_errors"], serde_json::json!([]), "{v}");
    common::assert_offered_sent(&v);
    v
}

#[test]
fn a_real_grpc_server_answers_calls_from_json_or_bytes_over_h2c_and_tls() {
    let Some(python) = grpc_python() else { return };
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("runs.sqlite");
    std::fs::write(
        d.join("ping.json"),
        r#"{"text": "hello", "n": 7, "ids": [1, 2]}"#,
    )
    .unwrap();
    // The same Ping as protobuf bytes, encoded by hand: text (1) "hello", n (2) 7, ids (3)
    // packed [1, 2].
    let bytes = [&[0x0a, 5][..], b"hello", &[0x10, 7, 0x1a, 2, 1, 2][..]].concat();
    std::fs::write(d.join("ping.bin"), &bytes).unwrap();
    let proto = here("echo.proto");
    let json = d.join("ping.json");

    let plain = Server::start(&python, None);
    let url = format!("grpc://127.0.0.1:{}", plain.port);
    let method = "tailscope.test.Echo/Say";
    let args = [
        "--method",
        method,
        "--proto",
        proto.to_str().unwrap(),
        "--message",
    ];
    assert_all_ok(&run(
        &url,
        &[&args[..], &[json.to_str().unwrap()]].concat(),
        &db,
    ));
    // Protobuf bytes without a .proto, and the method as the URL's path.
    let v = assert_all_ok(&run(
        &format!("{url}/{method}"),
        &["--message", d.join("ping.bin").to_str().unwrap()],
        &db,
    ));
    assert!(v.get("tls").is_none_or(|t| t.is_null()), "{v}");
    // Inline JSON (--data) and metadata: Auth answers only calls that carry its token.
    let auth = [
        "--method",
        "tailscope.test.Echo/Auth",
        "--proto",
        proto.to_str().unwrap(),
        "--data",
        r#"{"text": "hi"}"#,
    ];
    let token = ["--metadata", "authorization: Bearer t0k"];
    assert_all_ok(&run(&url, &[&auth[..], &token[..]].concat(), &db));
    let out = run(&url, &auth, &db);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("gRPC UNAUTHENTICATED (16)"),
        "{}",
        stderr(&out)
    );
    drop(plain);

    // Over TLS, with a certificate of a CA only --ca vouches for; HTTP/2 agreed by ALPN.
    private_ca_certificate(d);
    let secure = Server::start(&python, Some(d));
    let url = format!("grpcs://127.0.0.1:{}", secure.port);
    let ca = d.join("ca.pem");
    let v = assert_all_ok(&run(
        &url,
        &[
            &args[..],
            &[json.to_str().unwrap(), "--ca", ca.to_str().unwrap()],
        ]
        .concat(),
        &db,
    ));
    assert_eq!(v["tls"]["alpn"], "h2", "{v}");
    assert_eq!(v["tls"]["handshakes"], 2, "{v}");
    // Without --ca the server's certificate is not trusted: a clear failure.
    let out = run(&url, &["--method", method], &db);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("certificate"), "{}", stderr(&out));
}

#[test]
fn non_ok_statuses_are_counted_by_code_and_a_run_of_only_errors_says_which() {
    let Some(python) = grpc_python() else { return };
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.sqlite");
    let server = Server::start(&python, None);
    let url = format!("grpc://127.0.0.1:{}", server.port);
    for (method, code) in [
        ("tailscope.test.Echo/Fail", "gRPC RESOURCE_EXHAUSTED (8)"),
        ("tailscope.test.Echo/Nope", "gRPC UNIMPLEMENTED (12)"),
    ] {
        let out = run(&url, &["--method", method], &db);
        let v = json_of(&out);
        assert_eq!(out.status.code(), Some(1), "{v}\n{}", stderr(&out));
        assert_eq!(v["status"], "failed", "{v}");
        assert!(stderr(&out).contains(code), "{}", stderr(&out));
        // Every call of the run was answered, with that status: the warm-up's too.
        let errors = v["outcomes"]["error"].as_u64().unwrap();
        assert!(errors > 500 && v["outcomes"]["ok"] == 0, "{v}");
        assert!(v["error_codes"][code].as_u64().unwrap() >= errors, "{v}");
        assert_eq!(v["error_codes"].as_object().unwrap().len(), 1, "{v}");
    }
}

#[test]
fn bad_grpc_input_exits_2_in_one_line_and_writes_nothing() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("runs.sqlite");
    let proto = here("echo.proto");
    let proto = proto.to_str().unwrap();
    std::fs::write(d.join("bad.json"), r#"{"text": 5}"#).unwrap();
    std::fs::write(d.join("big.bin"), vec![0u8; 70_000]).unwrap();
    let file = |f: &str| d.join(f).to_str().unwrap().to_string();
    let m = "tailscope.test.Echo/Say";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["grpc://127.0.0.1:1".into()], "need --method"),
        (
            vec!["grpc://127.0.0.1:1".into(), "--method".into(), "Say".into()],
            "package.Service/Method",
        ),
        (
            vec!["http://127.0.0.1:1".into(), "--method".into(), m.into()],
            "apply to gRPC targets",
        ),
        (
            vec![
                "grpc://".into(),
                "--spawn".into(),
                "--method".into(),
                m.into(),
            ],
            "no gRPC server to start",
        ),
        (
            vec![
                "grpc://127.0.0.1:1".into(),
                "--method".into(),
                m.into(),
                "--proto".into(),
                file("none.proto"),
            ],
            "no such file",
        ),
        (
            vec![
                "grpc://127.0.0.1:1".into(),
                "--method".into(),
                "tailscope.test.Echo/Nope".into(),
                "--proto".into(),
                proto.into(),
            ],
            "has no method Nope",
        ),
        (
            vec![
                "grpc://127.0.0.1:1".into(),
                "--method".into(),
                m.into(),
                "--proto".into(),
                proto.into(),
                "--message".into(),
                file("bad.json"),
            ],
            "not a tailscope.test.Ping",
        ),
        (
            vec![
                "grpc://127.0.0.1:1".into(),
                "--method".into(),
                m.into(),
                "--message".into(),
                file("big.bin"),
            ],
            "at most 65530",
        ),
        (
            vec![
                format!("grpc://127.0.0.1:1/{m}"),
                "--method".into(),
                "a.B/C".into(),
            ],
            "name different methods",
        ),
        (
            vec![
                "grpcs://127.0.0.1:1".into(),
                "--method".into(),
                m.into(),
                "--insecure".into(),
                "--ca".into(),
                file("bad.json"),
            ],
            "exclude each other",
        ),
    ];
    for (args, want) in cases {
        let out = bin()
            .arg("run")
            .args(&args)
            .args(["--rate", "100", "--duration", "1s", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(want) && err.trim().lines().count() == 1,
            "{args:?}: {err}"
        );
        assert!(!db.exists(), "{args:?} wrote the store");
    }
}

/// A gRPC server over TLS killed mid-run: the run fails (exit 1), is stored as failed with
/// what it measured before, and says what happened to the connections.
#[test]
fn a_grpcs_server_killed_mid_run_fails_the_run_and_keeps_what_it_measured() {
    let Some(python) = grpc_python() else { return };
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    private_ca_certificate(d);
    let mut server = Server::start(&python, Some(d));
    let url = format!("grpcs://127.0.0.1:{}/tailscope.test.Echo/Say", server.port);
    let ca = d.join("ca.pem");
    let args = [
        url.as_str(),
        "--ca",
        ca.to_str().unwrap(),
        "--cpus",
        "0",
        "--rate",
        "500",
        "--duration",
        "3s",
        "--warmup",
        "300ms",
        "--no-noise-probe",
    ];
    let v = common::run_with_server_killed(
        &args,
        &d.join("runs.sqlite"),
        &mut server.child,
        std::time::Duration::from_millis(1500),
    );
    let errors = v["connection_errors"].as_array().unwrap();
    assert!(!errors.is_empty(), "the connections' failure is named: {v}");
}
