//! What a gRPC target is called with: `--method package.Service/Method`, and the request
//! message as protobuf bytes from a file (`--message FILE`), or as JSON mapped onto the
//! method's input type from a `.proto` file (`--proto FILE --message FILE.json`), the way
//! ghz and grpcurl read their data. Everything is read and checked here, before anything runs.

use std::path::{Path, PathBuf};

use load::GrpcWorkload;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor};

use crate::error::{invalid, LabError};

/// What the user said about the call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrpcSpec {
    /// `package.Service/Method` (also accepted: a leading `/`, or `package.Service.Method`).
    pub method: Option<String>,
    /// A `.proto` file declaring the service: the message file is JSON then.
    pub proto: Option<PathBuf>,
    /// The request message: protobuf bytes, or JSON with `proto` (none: the empty message).
    pub message: Option<PathBuf>,
    /// The request message as JSON on the command line (`--data`, with `proto`).
    pub data: Option<String>,
    /// Custom metadata, `KEY:VALUE` each (`--metadata`).
    pub metadata: Vec<String>,
}

impl GrpcSpec {
    /// Whether any of the gRPC options was given.
    pub fn given(&self) -> bool {
        *self != GrpcSpec::default()
    }
}

/// `package.Service/Method` in its three spellings → (`package.Service`, `Method`).
fn split_method(m: &str) -> Result<(&str, &str), LabError> {
    let m = m.strip_prefix('/').unwrap_or(m);
    let split = match m.split_once('/') {
        Some(v) => Some(v),
        None => m.rsplit_once('.'),
    };
    match split {
        Some((service, method))
            if !service.is_empty()
                && !method.is_empty()
                && !method.contains(['/', '.'])
                && !service.contains('/') =>
        {
            Ok((service, method))
        }
        _ => Err(invalid(format!(
            "--method must be package.Service/Method, got '{}'",
            crate::error::clip(m)
        ))),
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, LabError> {
    std::fs::read(path).map_err(|e| {
        invalid(format!(
            "{what} {}: {e}",
            crate::error::clip(&path.display().to_string())
        ))
    })
}

/// The method `service`/`method` in the `.proto` file, or why not.
fn method_in(proto: &Path, service: &str, method: &str) -> Result<MethodDescriptor, LabError> {
    let shown = crate::error::clip(&proto.display().to_string()).into_owned();
    if !proto.is_file() {
        return Err(invalid(format!("--proto {shown}: no such file")));
    }
    let dir = proto
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let set = protox::compile([proto], [dir])
        .map_err(|e| invalid(format!("--proto {shown}: {}", one_line(&e.to_string()))))?;
    let pool = DescriptorPool::from_file_descriptor_set(set)
        .map_err(|e| invalid(format!("--proto {shown}: {}", one_line(&e.to_string()))))?;
    let Some(svc) = pool.get_service_by_name(service) else {
        let known: Vec<String> = pool.services().map(|s| s.full_name().to_string()).collect();
        return Err(invalid(format!(
            "--method: no service {service} in {shown} (it declares: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let found = svc.methods().find(|m| m.name() == method);
    match found {
        Some(m) if m.is_client_streaming() || m.is_server_streaming() => Err(invalid(format!(
            "--method {service}/{method} streams; tailscope calls unary methods only"
        ))),
        Some(m) => Ok(m),
        None => {
            let known: Vec<String> = svc.methods().map(|m| m.name().to_string()).collect();
            Err(invalid(format!(
                "--method: {service} has no method {method} in {shown} (it has: {})",
                known.join(", ")
            )))
        }
    }
}

/// serde's and protox's messages can span lines; the error is one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The call's workload: its path and request bytes.
pub fn workload(spec: &GrpcSpec) -> Result<GrpcWorkload, LabError> {
    let Some(m) = spec.method.as_deref() else {
        return Err(invalid(
            "grpc:// and grpcs:// need --method package.Service/Method",
        ));
    };
    let (service, method) = split_method(m)?;
    let message = match (&spec.proto, &spec.message, &spec.data) {
        (_, Some(_), Some(_)) => {
            return Err(invalid("--message and --data exclude each other"));
        }
        (None, _, Some(_)) => {
            return Err(invalid(
                "--data is JSON for the method's input type: it needs --proto FILE",
            ));
        }
        (None, None, None) => Vec::new(),
        (None, Some(file), None) => read(file, "--message")?,
        (Some(proto), file, data) => {
            let md = method_in(proto, service, method)?;
            let (json, shown) = match (file, data) {
                (Some(f), _) => (
                    read(f, "--message")?,
                    crate::error::clip(&f.display().to_string()).into_owned(),
                ),
                (None, Some(d)) => (d.as_bytes().to_vec(), "(--data)".to_string()),
                (None, None) => (b"{}".to_vec(), "{}".to_string()),
            };
            let mut de = serde_json::Deserializer::from_slice(&json);
            let msg = DynamicMessage::deserialize(md.input(), &mut de)
                .and_then(|m| de.end().map(|()| m))
                .map_err(|e| {
                    invalid(format!(
                        "--message {shown} is not a {} in JSON: {}",
                        md.input().full_name(),
                        one_line(&e.to_string())
                    ))
                })?;
            msg.encode_to_vec()
        }
    };
    if message.len() > load::MAX_GRPC_MESSAGE {
        return Err(invalid(format!(
            "--message is {} bytes; at most {} are sent",
            message.len(),
            load::MAX_GRPC_MESSAGE
        )));
    }
    let mut metadata = Vec::new();
    for m in &spec.metadata {
        let pair = m
            .split_once(':')
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()));
        match pair {
            Some((k, v)) if load::grpc_metadata_ok(&k, &v) => metadata.push((k, v)),
            _ => {
                return Err(invalid(format!(
                    "--metadata '{}' must be KEY:VALUE, a header name that is not grpc-*, te, content-type, user-agent or *-bin, and a printable ASCII value",
                    crate::error::clip(m)
                )))
            }
        }
    }
    Ok(GrpcWorkload {
        path: format!("/{service}/{method}"),
        message,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTO: &str = r#"syntax = "proto3";
package demo.v1;
message Req { string name = 1; int32 n = 2; repeated uint64 ids = 3; }
message Resp { string text = 1; }
service Echo {
  rpc Say(Req) returns (Resp);
  rpc Watch(Req) returns (stream Resp);
}
"#;

    fn files(json: &str) -> (tempfile::TempDir, GrpcSpec) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("echo.proto"), PROTO).unwrap();
        std::fs::write(dir.path().join("req.json"), json).unwrap();
        let spec = GrpcSpec {
            method: Some("demo.v1.Echo/Say".into()),
            proto: Some(dir.path().join("echo.proto")),
            message: Some(dir.path().join("req.json")),
            ..GrpcSpec::default()
        };
        (dir, spec)
    }

    #[test]
    fn json_is_encoded_as_the_methods_input_type() {
        let (_dir, spec) = files(r#"{"name": "ab", "n": 300, "ids": ["1", 2]}"#);
        let w = workload(&spec).unwrap();
        assert_eq!(w.path, "/demo.v1.Echo/Say");
        // Field 1 (len 2, "ab"), field 2 (varint 300), field 3 packed (1, 2): the protobuf
        // encoding written out by hand.
        assert_eq!(
            w.message,
            [0x0a, 2, b'a', b'b', 0x10, 0xac, 0x02, 0x1a, 2, 1, 2]
        );
        // The three spellings of the method name the same call.
        for m in ["/demo.v1.Echo/Say", "demo.v1.Echo.Say"] {
            let s = GrpcSpec {
                method: Some(m.into()),
                ..spec.clone()
            };
            assert_eq!(workload(&s).unwrap(), w);
        }
    }

    #[test]
    fn bad_calls_are_refused_with_the_reason() {
        let (dir, spec) = files(r#"{"name": 5}"#);
        let e = workload(&spec).unwrap_err().to_string();
        assert!(e.contains("demo.v1.Req") && e.contains("req.json"), "{e}");
        let with = |m: &str| GrpcSpec {
            method: Some(m.into()),
            ..spec.clone()
        };
        let cases = [
            (with("demo.v1.Echo/Nope"), "has no method Nope"),
            (with("demo.v1.Other/Say"), "no service demo.v1.Other"),
            (with("demo.v1.Echo/Watch"), "unary"),
            (with("Say"), "package.Service/Method"),
            (
                GrpcSpec {
                    method: None,
                    ..spec.clone()
                },
                "need --method",
            ),
            (
                GrpcSpec {
                    proto: Some(dir.path().join("none.proto")),
                    ..with("demo.v1.Echo/Say")
                },
                "no such file",
            ),
        ];
        for (s, want) in cases {
            let e = workload(&s).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "{want}: {e}");
        }
        std::fs::write(
            dir.path().join("echo.proto"),
            "syntax = \"proto3\";\nmessage {",
        )
        .unwrap();
        let e = workload(&spec).unwrap_err().to_string();
        assert!(e.contains("echo.proto") && !e.contains('\n'), "{e}");
        // Without a .proto the message file is sent as it is.
        std::fs::write(dir.path().join("raw.bin"), [0x0a, 1, b'x']).unwrap();
        let raw = GrpcSpec {
            method: Some("a.B/C".into()),
            message: Some(dir.path().join("raw.bin")),
            ..GrpcSpec::default()
        };
        assert_eq!(workload(&raw).unwrap().message, [0x0a, 1, b'x']);
    }
}
