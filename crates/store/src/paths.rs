//! Where the store lives by default.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::StoreError;

/// Environment variable naming the store file; overrides every other default.
pub const DEFAULT_DB_ENV: &str = "TAILSCOPE_DB";

/// The default store file:
///
/// 1. `$TAILSCOPE_DB` when set and non-empty;
/// 2. else `$XDG_DATA_HOME/tailscope/runs.db` when `XDG_DATA_HOME` is an absolute path
///    (the XDG spec says relative values are to be ignored);
/// 3. else `$HOME/.local/share/tailscope/runs.db`.
///
/// Fails with [`StoreError::NoDefaultPath`] when none of these is set.
pub fn default_path() -> Result<PathBuf, StoreError> {
    default_path_from(|k| std::env::var_os(k))
}

/// [`default_path`] with the environment supplied by the caller (tests).
pub(crate) fn default_path_from(
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, StoreError> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(p) = set(DEFAULT_DB_ENV) {
        return Ok(PathBuf::from(p));
    }
    if let Some(xdg) = set("XDG_DATA_HOME").map(PathBuf::from) {
        if xdg.is_absolute() {
            return Ok(xdg.join("tailscope").join("runs.db"));
        }
    }
    if let Some(home) = set("HOME") {
        return Ok(PathBuf::from(home).join(".local/share/tailscope/runs.db"));
    }
    Err(StoreError::NoDefaultPath)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<PathBuf, StoreError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        default_path_from(move |k| {
            vars.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn precedence() {
        let all = [
            ("TAILSCOPE_DB", "/tmp/x.db"),
            ("XDG_DATA_HOME", "/data"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(with(&all).unwrap(), PathBuf::from("/tmp/x.db"));
        assert_eq!(
            with(&all[1..]).unwrap(),
            PathBuf::from("/data/tailscope/runs.db")
        );
        assert_eq!(
            with(&all[2..]).unwrap(),
            PathBuf::from("/home/u/.local/share/tailscope/runs.db")
        );
        assert!(matches!(with(&[]), Err(StoreError::NoDefaultPath)));
    }

    #[test]
    fn empty_and_relative_values_are_ignored() {
        let vars = [
            ("TAILSCOPE_DB", ""),
            ("XDG_DATA_HOME", "relative/dir"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(
            with(&vars).unwrap(),
            PathBuf::from("/home/u/.local/share/tailscope/runs.db")
        );
    }
}
