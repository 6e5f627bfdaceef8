//! `default_path` reads the real environment. This binary holds the only test that
//! changes it, so no other test thread can observe the change.

use std::path::PathBuf;

#[test]
fn default_path_honours_tailscope_db() {
    std::env::set_var(store::DEFAULT_DB_ENV, "/tmp/somewhere/else.db");
    assert_eq!(
        store::default_path().unwrap(),
        PathBuf::from("/tmp/somewhere/else.db")
    );
    std::env::remove_var(store::DEFAULT_DB_ENV);
    std::env::set_var("XDG_DATA_HOME", "/xdg/data");
    assert_eq!(
        store::default_path().unwrap(),
        PathBuf::from("/xdg/data/tailscope/runs.db")
    );
}
