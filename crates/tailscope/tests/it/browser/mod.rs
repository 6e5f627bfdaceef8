//! Opening a page in headless Chromium (Debian's `chromium`) as a reader would, and what the
//! tests check of it: the console (every message is a failure: a clean page logs nothing),
//! the network (Chromium's NetLog, keeping only the requests the page itself made — the
//! browser's own background fetches carry no initiator), the DOM after its script ran, and a
//! screenshot of the whole page. Also the real dependencies of the report tests: Chromium and
//! the Python virtual environment with the reference HdrHistogram reader and the reference
//! OpenMetrics parser (PyPI's prometheus_client).
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// A dependency the test needs for real: found, or (outside CI) `None` after saying so. In CI
/// (`CI=true`) a missing one fails the test: it is never silently skipped.
pub fn need(what: &str, found: Option<PathBuf>) -> Option<PathBuf> {
    if found.is_some() {
        return found;
    }
    let msg = format!("{what} is missing (./scripts/test.sh installs it)");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Debian's Chromium.
pub fn chromium() -> Option<PathBuf> {
    need(
        "chromium (Debian package chromium)",
        on_path("chromium").or_else(|| on_path("chromium-browser")),
    )
}

/// The Python of the test virtual environment, with `hdrh` importable: `$TAILSCOPE_TEST_PYTHON`,
/// else `target/test-venv/bin/python` as scripts/test.sh makes it.
pub fn hdr_python() -> Option<PathBuf> {
    venv_python(
        "hdrh.log",
        "the test virtual environment with PyPI's hdrhistogram",
    )
}

/// The same Python with PyPI's `prometheus_client` (its OpenMetrics parser) importable.
pub fn openmetrics_python() -> Option<PathBuf> {
    venv_python(
        "prometheus_client.openmetrics.parser",
        "the test virtual environment with PyPI's prometheus_client",
    )
}

/// The same Python with PyPI's `jsonschema` (a JSON Schema 2020-12 validator) importable.
pub fn schema_python() -> Option<PathBuf> {
    venv_python(
        "jsonschema",
        "the test virtual environment with PyPI's jsonschema",
    )
}

/// The same Python with PyPI's `grpcio` (a real gRPC server) importable.
pub fn grpc_python() -> Option<PathBuf> {
    venv_python("grpc", "the test virtual environment with PyPI's grpcio")
}

/// The test virtual environment's Python when `module` imports in it.
fn venv_python(module: &str, what: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os("TAILSCOPE_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv/bin/python")
        });
    let works = Command::new(&candidate)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    need(what, works.then_some(candidate))
}

/// What Chromium made of a page.
pub struct Opened {
    pub dom: String,
    /// Console messages (each line Chromium logged for the page's console).
    pub console: Vec<String>,
    /// URLs the page requested.
    pub requests: Vec<String>,
    /// The screenshot: width, height, RGB pixels.
    pub shot: (u32, u32, Vec<u8>),
}

fn chromium_cmd(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new("timeout");
    c.arg("120").arg(chromium).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ]);
    c.arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The URLs of the requests the page made, from a NetLog: URL_REQUEST_START_JOB events with
/// an initiator (the browser's own requests say "not an origin").
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).unwrap_or_default();
    // Chromium may leave the log unterminated when it exits; close it.
    let v: serde_json::Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .unwrap_or_else(|e| panic!("cannot read the NetLog {}: {e}", netlog.display()));
    let Some(start) = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_u64() else {
        panic!("NetLog without URL_REQUEST_START_JOB");
    };
    v["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["type"].as_u64() == Some(start))
        .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
        .collect()
}

fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut dec = png::Decoder::new(std::io::BufReader::new(f));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    let ch = info.color_type.samples();
    let rgb: Vec<u8> = buf[..info.buffer_size()]
        .chunks(ch)
        .flat_map(|p| match ch {
            1 | 2 => [p[0], p[0], p[0]],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (info.width, info.height, rgb)
}

/// Opens `page` in Chromium twice: once for its DOM, console and requests, once for a
/// screenshot of its whole height (at the same width, so the layout is the same).
pub fn open(chromium: &Path, page: &Path, dir: &Path) -> Opened {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let netlog = dir.join("net.json");
    let out = chromium_cmd(chromium, &dir.join("profile-dom"))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--window-size=1280,900")
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let console: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let height: u32 = attr(&dom, "<body", "data-page-height")
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| panic!("the page's script did not run: no data-page-height"));
    let shot_path = dir.join("shot.png");
    let out = chromium_cmd(chromium, &dir.join("profile-shot"))
        .arg(format!("--window-size=1280,{}", height.min(16_000)))
        .arg(format!("--screenshot={}", shot_path.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot_path.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Opened {
        dom,
        console,
        requests: page_requests(&netlog),
        shot: decode_png(&shot_path),
    }
}

/// The value of attribute `name` in the first tag starting with `tag` in `html`.
pub fn attr<'a>(html: &'a str, tag: &str, name: &str) -> Option<&'a str> {
    let t = html.find(tag)?;
    let end = t + html[t..].find('>')?;
    let head = &html[t..end];
    let a = head.find(&format!("{name}=\""))? + name.len() + 2;
    let b = a + head[a..].find('"')?;
    Some(&head[a..b])
}

/// Every `<figure class="fig" …>…</figure>`: its name, its box in page pixels, its inner HTML.
pub fn figures(dom: &str) -> Vec<(String, [u32; 4], String)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("<figure class=\"fig\"") {
        let f = &rest[i..];
        let end = f.find("</figure>").unwrap_or(f.len());
        let body = &f[..end];
        let name = attr(body, "<figure", "data-figure")
            .unwrap_or("")
            .to_string();
        let b: Vec<u32> = attr(body, "<figure", "data-box")
            .unwrap_or("")
            .split(',')
            .filter_map(|x| x.parse().ok())
            .collect();
        assert_eq!(b.len(), 4, "figure {name} has no data-box");
        out.push((name, [b[0], b[1], b[2], b[3]], body.to_string()));
        rest = &f[end..];
    }
    out
}

/// In the screenshot, within `bx`: the share of pixels that are not (near) white, and how many
/// distinct colours (to 4 bits a channel) they have.
pub fn ink(shot: &(u32, u32, Vec<u8>), bx: [u32; 4]) -> (f64, usize) {
    let (w, h, px) = shot;
    let mut inked = 0u64;
    let mut total = 0u64;
    let mut colours = std::collections::HashSet::new();
    for y in bx[1]..(bx[1] + bx[3]).min(*h) {
        for x in bx[0]..(bx[0] + bx[2]).min(*w) {
            let i = 3 * (y as usize * *w as usize + x as usize);
            let (r, g, b) = (px[i], px[i + 1], px[i + 2]);
            total += 1;
            if r < 235 || g < 235 || b < 235 {
                inked += 1;
                colours.insert((r >> 4, g >> 4, b >> 4));
            }
        }
    }
    (inked as f64 / total.max(1) as f64, colours.len())
}
