//! The one error type of the store.

use std::path::PathBuf;

/// Everything that can go wrong while opening, reading or writing the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused an operation (locked beyond the busy timeout, disk full, not a database...).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Reading or writing a file or an export stream failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A JSON column or export could not be (de)serialised.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored blob or row does not decode: the file was damaged or written by a foreign tool.
    #[error("corrupt store data: {0}")]
    Corrupt(String),
    /// The file was written by a newer tailscope whose schema this build does not know.
    #[error("store schema version {found} is newer than this build supports ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
    /// The store can be read but not written (a read-only file, an immutable one, a
    /// directory the user cannot write): found when it is opened, before anything starts.
    #[error("{0} cannot be written (read-only file or directory); give a store you can write with --db or TAILSCOPE_DB")]
    ReadOnly(std::path::PathBuf),
    /// No run has this id.
    #[error("no run with id {0}")]
    UnknownRun(i64),
    /// A column's length differs from the record count of its set.
    #[error("column {name:?} has {got} values, expected {expected}")]
    ColumnLength {
        name: String,
        expected: usize,
        got: usize,
    },
    /// Two columns share one name.
    #[error("duplicate column name {0:?}")]
    DuplicateColumn(String),
    /// No location for the default database could be derived from the environment.
    #[error("cannot locate the default store: set TAILSCOPE_DB, XDG_DATA_HOME or HOME")]
    NoDefaultPath,
    /// Creating the directory that holds the database failed.
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
}
