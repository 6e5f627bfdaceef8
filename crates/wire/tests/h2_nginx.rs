//! The HTTP/2 codecs against a real server: Debian's nginx with HTTP/2 over cleartext (prior
//! knowledge, as `h2c://` will speak it). Three requests go out at once on one connection
//! (streams 1, 3, 5); nginx's SETTINGS are acknowledged, its header blocks decode through
//! HPACK (the second and third use what the first put in the dynamic table), and each stream
//! ends with the file or a 404. A missing nginx FAILS this test (scripts/test.sh installs it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wire::h2::*;

struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nginx(dir: &Path) -> (Nginx, u16) {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .find(|p| Path::new(p).exists())
        .expect("nginx missing: apt-get install nginx");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = dir.display();
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/a.txt"), "the file\n").unwrap();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            // One process (no master): the kill below ends it whole, where a killed master
            // left its worker running.
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d};\n\
             fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
             server {{ listen 127.0.0.1:{port} http2; root {d}/www; }} }}\n"
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-p")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let n = Nginx(child);
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "nginx did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (n, port)
}

#[test]
fn three_streams_at_once_on_one_connection_to_nginx() {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, port) = nginx(dir.path());
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    encode_preface(&mut out, &[(setting::ENABLE_PUSH, 0)]);
    let mut hpack = Hpack::new();
    let authority = format!("127.0.0.1:{port}");
    let paths = [(1u32, "/a.txt"), (3, "/a.txt"), (5, "/missing")];
    for (stream, path) in paths {
        let mut block = Vec::new();
        hpack.encode_request(
            &Request {
                method: "GET",
                scheme: "http",
                authority: &authority,
                path,
                headers: &[],
            },
            &mut block,
        );
        encode_headers(&mut out, stream, &block, true, DEFAULT_MAX_FRAME).unwrap();
    }
    s.write_all(&out).unwrap();

    let (mut buf, mut tmp) = (Vec::new(), vec![0u8; 65_536]);
    let mut status = std::collections::BTreeMap::new();
    let mut body: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
    let mut ended = Vec::new();
    let mut settings_seen = false;
    while ended.len() < paths.len() {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "nginx closed the connection: {status:?}");
        buf.extend_from_slice(&tmp[..n]);
        let mut at = 0;
        while let Some((used, f)) = decode_frame(&buf[at..], DEFAULT_MAX_FRAME).unwrap() {
            match f {
                Frame::Settings { ack: false, params } => {
                    // nginx announces its stream limit; the acknowledgement is ours to send.
                    assert!(params
                        .iter()
                        .any(|(id, v)| *id == setting::MAX_CONCURRENT_STREAMS && *v >= 3));
                    settings_seen = true;
                    let mut ack = Vec::new();
                    encode_settings_ack(&mut ack);
                    s.write_all(&ack).unwrap();
                }
                Frame::Headers {
                    stream,
                    block,
                    end_headers,
                    end_stream,
                } => {
                    assert!(end_headers, "nginx's heads fit one frame");
                    let fields = hpack.decode(block).unwrap();
                    assert_eq!(
                        fields.get("server").map(|v| v.starts_with(b"nginx")),
                        Some(true)
                    );
                    status.insert(stream, fields.status().unwrap());
                    if end_stream {
                        ended.push(stream);
                    }
                }
                Frame::Data {
                    stream,
                    data,
                    end_stream,
                    ..
                } => {
                    body.entry(stream).or_default().extend_from_slice(data);
                    if end_stream {
                        ended.push(stream);
                    }
                }
                Frame::Settings { ack: true, .. } | Frame::WindowUpdate { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
            at += used;
        }
        buf.drain(..at);
    }
    assert!(settings_seen);
    ended.sort_unstable();
    assert_eq!(ended, [1, 3, 5]);
    assert_eq!(
        status.into_iter().collect::<Vec<_>>(),
        [(1, 200), (3, 200), (5, 404)]
    );
    assert_eq!(body[&1], b"the file\n");
    assert_eq!(body[&3], b"the file\n");
}
