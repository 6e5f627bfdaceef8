//! Finding a server's executable and asking it for its version.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Kind, TargetError};

/// Directories searched after `PATH`: Debian installs nginx in /usr/sbin, which is not on
/// an ordinary user's `PATH`.
const SBIN_DIRS: [&str; 3] = ["/usr/sbin", "/usr/local/sbin", "/sbin"];

pub(crate) fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The server's executable: the first match on `PATH`, then in /usr/sbin, /usr/local/sbin
/// and /sbin. A missing server is an error that names the package to install.
pub fn find_binary(kind: Kind) -> Result<PathBuf, TargetError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(kind.program()))
        .find(|p| is_executable_file(p))
        .ok_or(TargetError::NotInstalled {
            program: kind.program(),
            package: kind.package(),
        })
}

/// The first line of the server's own version output: `memcached -V`, `nginx -v` (which
/// prints on stderr), `redis-server --version`. E.g. `memcached 1.6.18`,
/// `nginx version: nginx/1.22.1`, `Redis server v=7.0.15 sha=… malloc=… bits=64 build=…`.
pub fn version_of(kind: Kind, binary: &Path) -> Result<String, TargetError> {
    let flag = match kind {
        Kind::Memcached => "-V",
        Kind::Nginx => "-v",
        Kind::Redis => "--version",
    };
    let out = Command::new(binary)
        .arg(flag)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| TargetError::Spawn {
            program: binary.to_path_buf(),
            source,
        })?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    let looks_right = match kind {
        Kind::Memcached => line.starts_with("memcached "),
        Kind::Nginx => line.contains("nginx/"),
        Kind::Redis => line.starts_with("Redis server "),
    };
    if !out.status.success() || !looks_right {
        return Err(TargetError::io(
            format!("{} {flag} ({})", binary.display(), out.status),
            std::io::Error::other(format!(
                "unexpected version output {text:?}: not {}",
                kind.program()
            )),
        ));
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executables_only() {
        assert!(is_executable_file(Path::new("/bin/sh")));
        assert!(!is_executable_file(Path::new("/etc/passwd")));
        assert!(!is_executable_file(Path::new("/")));
        assert!(!is_executable_file(Path::new("/no/such/file")));
    }

    #[test]
    fn missing_server_names_the_package() {
        let e = TargetError::NotInstalled {
            program: Kind::Redis.program(),
            package: Kind::Redis.package(),
        };
        assert_eq!(
            e.to_string(),
            "redis-server is not installed (apt-get install redis-server)"
        );
    }
}
