//! Each server's command line and generated files, for a given port and temporary directory.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use crate::{HttpFiles, Kind, SpawnConfig, TargetError};

/// memcached's own default for `-t`; passed explicitly so the command line says it.
pub(crate) const MEMCACHED_DEFAULT_THREADS: u32 = 4;

/// Directory under the temporary directory that nginx serves.
pub(crate) const WWW: &str = "www";

/// The server's arguments (after the program name) to listen on `LISTEN:port` (127.0.0.1, or
/// the container's address, see [`SpawnConfig::listen`]). For nginx
/// this also (re)writes `nginx.conf` in `dir`, since the port lives in the config.
pub(crate) fn args(
    cfg: &SpawnConfig,
    dir: &Path,
    port: u16,
    as_root: bool,
) -> Result<Vec<String>, TargetError> {
    let mut a: Vec<String> = Vec::new();
    let listen = cfg.listen().to_string();
    let mut push = |s: &str| a.push(s.to_string());
    match cfg.kind {
        Kind::Memcached => {
            let udp_port = if cfg.udp { port } else { 0 };
            for s in [
                "-p",
                &port.to_string(),
                "-U",
                &udp_port.to_string(),
                "-l",
                &listen,
                "-t",
                &cfg.worker_threads().to_string(),
            ] {
                push(s);
            }
            if let Some(m) = cfg.memory_mb {
                push("-m");
                push(&m.to_string());
            }
            if cfg.tls {
                // TLS on the TCP port with the certificate made for this start.
                let d = dir.to_string_lossy();
                push("-Z");
                push("-o");
                push(&format!(
                    "ssl_chain_cert={d}/{},ssl_key={d}/{}",
                    crate::cert::CERT_FILE,
                    crate::cert::KEY_FILE
                ));
            }
            // memcached refuses to run as root unless told which user to be.
            if as_root {
                push("-u");
                push("root");
            }
        }
        Kind::Redis => {
            let d = dir.to_string_lossy();
            // Over TLS the port is the TLS port and the cleartext one is closed.
            let plain = if cfg.tls { 0 } else { port };
            for s in [
                "--port",
                &plain.to_string(),
                "--bind",
                &listen,
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                &d,
            ] {
                push(s);
            }
            if let Some(t) = cfg.threads.filter(|&t| t > 1) {
                for s in [
                    "--io-threads",
                    &t.to_string(),
                    "--io-threads-do-reads",
                    "yes",
                ] {
                    push(s);
                }
            }
            if let Some(m) = cfg.memory_mb {
                push("--maxmemory");
                push(&format!("{m}mb"));
            }
            if cfg.tls {
                push("--tls-port");
                push(&port.to_string());
                for (flag, file) in [
                    ("--tls-cert-file", crate::cert::CERT_FILE),
                    ("--tls-key-file", crate::cert::KEY_FILE),
                    ("--tls-ca-cert-file", crate::cert::CA_FILE),
                ] {
                    push(flag);
                    push(&format!("{d}/{file}"));
                }
                push("--tls-auth-clients");
                push("no");
            }
        }
        Kind::Nginx => {
            let conf = dir.join("nginx.conf");
            std::fs::write(&conf, nginx_conf(cfg, dir, port, as_root))
                .map_err(|e| TargetError::io(format!("writing {}", conf.display()), e))?;
            let mut prefix = dir.to_string_lossy().into_owned();
            prefix.push('/');
            for s in ["-p", &prefix, "-c", &conf.to_string_lossy(), "-e", "stderr"] {
                push(s);
            }
        }
    }
    a.extend(cfg.extra_args.iter().cloned());
    Ok(a)
}

/// One bitmask per worker for `worker_cpu_affinity`: worker `i` on `cpus[i % len]`
/// (rightmost character is CPU 0).
fn cpu_masks(cpus: &[usize], workers: u32) -> String {
    let width = cpus.iter().max().map_or(1, |&m| m + 1);
    let mut out = String::new();
    for i in 0..workers as usize {
        let c = cpus[i % cpus.len()];
        let mask: String = (0..width)
            .rev()
            .map(|b| if b == c { '1' } else { '0' })
            .collect();
        out.push(' ');
        out.push_str(&mask);
    }
    out
}

/// The whole nginx configuration: foreground master with N workers, logs on stderr, every
/// temporary path inside `dir`, keep-alive connections that stay up for a whole run.
pub(crate) fn nginx_conf(cfg: &SpawnConfig, dir: &Path, port: u16, as_root: bool) -> String {
    let d = dir.to_string_lossy();
    let workers = cfg.worker_threads();
    let mut c = String::new();
    c.push_str("# generated by tailscope\ndaemon off;\nmaster_process on;\n");
    if as_root {
        // Without it the workers would switch to `nobody`, who cannot read the 0700 tempdir.
        c.push_str("user root;\n");
    }
    let _ = writeln!(c, "worker_processes {workers};");
    if !cfg.cpus.is_empty() {
        let _ = writeln!(c, "worker_cpu_affinity{};", cpu_masks(&cfg.cpus, workers));
    }
    let _ = writeln!(c, "worker_rlimit_nofile 16384;");
    let _ = writeln!(c, "pid {d}/nginx.pid;");
    c.push_str("error_log stderr warn;\n");
    c.push_str("events {\n    worker_connections 8192;\n}\n");
    // HTTP/2 with sendfile: nginx writes a response's HEADERS frame, then its DATA through
    // sendfile, and the second waits for the client's delayed ACK of the first (measured
    // with h2load -c 1 -m 1 on a 4 KiB file: 44 ms a request with sendfile, 55 µs without).
    let sendfile = if cfg.http2 { "off" } else { "on" };
    let _ = writeln!(c, "http {{\n    access_log off;\n    sendfile {sendfile};");
    c.push_str("    keepalive_requests 100000;\n    keepalive_timeout 600s;\n");
    if cfg.open_file_cache {
        // Descriptors and sizes of open files kept across requests (the study's NGINX
        // setting); entries stay valid for the whole run.
        c.push_str(
            "    open_file_cache max=200000 inactive=600s;\n    open_file_cache_valid 600s;\n",
        );
        c.push_str("    open_file_cache_min_uses 1;\n    open_file_cache_errors on;\n");
    }
    c.push_str("    default_type application/octet-stream;\n");
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(c, "    {t}_temp_path {d}/tmp_{t};");
    }
    let ssl = if cfg.tls { " ssl" } else { "" };
    let h2 = if cfg.http2 { " http2" } else { "" };
    let _ = writeln!(
        c,
        "    server {{\n        listen {}:{port}{ssl}{h2};",
        cfg.listen()
    );
    if cfg.tls {
        // TLS 1.2 and 1.3 with the certificate made for this start; sessions resumable by
        // cache and by ticket, as a production server's usually are.
        let _ = writeln!(
            c,
            "        ssl_certificate {d}/{};\n        ssl_certificate_key {d}/{};",
            crate::cert::CERT_FILE,
            crate::cert::KEY_FILE
        );
        c.push_str("        ssl_protocols TLSv1.2 TLSv1.3;\n");
        c.push_str("        ssl_session_cache shared:tls:10m;\n        ssl_session_tickets on;\n");
    }
    let _ = writeln!(
        c,
        "        root {d}/{WWW};\n        location / {{ }}\n    }}\n}}"
    );
    c
}

/// Writes `f0`..`f{count-1}` into `dir/www`; the content is a fixed printable pattern.
pub(crate) fn write_http_files(files: &HttpFiles, dir: &Path) -> Result<(), TargetError> {
    let www = dir.join(WWW);
    std::fs::create_dir_all(&www)
        .map_err(|e| TargetError::io(format!("creating {}", www.display()), e))?;
    let chunk: Vec<u8> = (0..65536u32).map(|i| b'a' + (i % 26) as u8).collect();
    for i in 0..files.count {
        let path = www.join(format!("f{i}"));
        let ctx = |e| TargetError::io(format!("writing {}", path.display()), e);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).map_err(ctx)?);
        let mut left = files.size_of(i);
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).map_err(ctx)?;
            left -= n as u64;
        }
        f.flush().map_err(ctx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_put_one_worker_per_cpu() {
        assert_eq!(cpu_masks(&[0], 2), " 1 1");
        assert_eq!(cpu_masks(&[1, 3], 3), " 0010 1000 0010");
    }

    #[test]
    fn memcached_args() {
        let mut c = SpawnConfig::new(Kind::Memcached);
        c.udp = true;
        c.threads = Some(2);
        c.memory_mb = Some(32);
        c.extra_args = vec!["-c".into(), "4096".into()];
        let a = args(&c, Path::new("/t"), 5000, true).unwrap().join(" ");
        assert_eq!(a, "-p 5000 -U 5000 -l 127.0.0.1 -t 2 -m 32 -u root -c 4096");
        c.udp = false;
        let a = args(&c, Path::new("/t"), 5000, false).unwrap().join(" ");
        assert!(a.starts_with("-p 5000 -U 0 ") && !a.contains("-u"), "{a}");
        c.tls = true;
        let a = args(&c, Path::new("/t"), 5000, false).unwrap().join(" ");
        assert!(
            a.contains("-Z -o ssl_chain_cert=/t/cert.pem,ssl_key=/t/key.pem"),
            "{a}"
        );
    }

    #[test]
    fn redis_args() {
        let mut c = SpawnConfig::new(Kind::Redis);
        let a = args(&c, Path::new("/t"), 6000, true).unwrap();
        assert_eq!(a[..4], ["--port", "6000", "--bind", "127.0.0.1"]);
        assert!(a.windows(2).any(|w| w == ["--save", ""]));
        assert!(!a.contains(&"--io-threads".to_string()));
        c.threads = Some(3);
        c.memory_mb = Some(100);
        let a = args(&c, Path::new("/t"), 6000, true).unwrap().join(" ");
        assert!(
            a.contains("--io-threads 3 --io-threads-do-reads yes"),
            "{a}"
        );
        assert!(a.ends_with("--maxmemory 100mb"), "{a}");
        c.tls = true;
        let a = args(&c, Path::new("/t"), 6000, true).unwrap().join(" ");
        assert!(a.starts_with("--port 0 --bind 127.0.0.1"), "{a}");
        assert!(
            a.contains("--tls-port 6000 --tls-cert-file /t/cert.pem --tls-key-file /t/key.pem"),
            "{a}"
        );
    }

    #[test]
    fn nginx_conf_has_the_placement_and_keepalive() {
        let mut c = SpawnConfig::new(Kind::Nginx);
        c.threads = Some(2);
        c.cpus = vec![1];
        let conf = nginx_conf(&c, Path::new("/tmp/x"), 8080, false);
        assert!(conf.contains("worker_processes 2;"));
        assert!(conf.contains("worker_cpu_affinity 10 10;"));
        assert!(conf.contains("listen 127.0.0.1:8080;"));
        assert!(conf.contains("keepalive_requests 100000;"));
        assert!(conf.contains("root /tmp/x/www;"));
        assert!(!conf.contains("user root"));
        assert!(!conf.contains("open_file_cache"));
        c.open_file_cache = true;
        let conf = nginx_conf(&c, Path::new("/tmp/x"), 8080, false);
        assert!(
            conf.contains("open_file_cache max=200000 inactive=600s;"),
            "{conf}"
        );
        assert!(nginx_conf(&c, Path::new("/tmp/x"), 1, true).contains("user root;"));
        assert!(conf.contains("sendfile on;"));
        c.http2 = true;
        let conf = nginx_conf(&c, Path::new("/tmp/x"), 8080, false);
        assert!(conf.contains("listen 127.0.0.1:8080 http2;"), "{conf}");
        assert!(conf.contains("sendfile off;"), "{conf}");
    }

    #[test]
    fn http_files_have_their_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let files = HttpFiles::with_sizes(vec![0, 1, 70_000]);
        write_http_files(&files, dir.path()).unwrap();
        for (i, want) in [0u64, 1, 70_000].iter().enumerate() {
            let len = std::fs::metadata(dir.path().join(WWW).join(format!("f{i}")))
                .unwrap()
                .len();
            assert_eq!(len, *want);
        }
    }
}
