//! # store — the results store (the `store` stage of the data flow)
//!
//! ```text
//! load generator ──► per-request records ──► analysis ──► [store] ──► report / runs export
//! ```
//!
//! One SQLite file (bundled SQLite, WAL mode, 5 s busy timeout, so concurrent tailscope
//! processes can share it) holds every run: its kind, target, configuration and host
//! snapshot as JSON at [`Store::begin_run`]; its status and analysis summary at
//! [`Store::finish_run`], with the run's typed form beside them at [`Store::finish_run_typed`]
//! (a [`RunBlob`]: bytes and the version of their encoding, which the crate that owns the type
//! — `lab` — writes and reads; runs stored before schema 4 have none); and, when kept, its raw per-request records as compressed
//! columnar blobs: whole ([`Store::put_columns`]) or, as a run streams them, in chunks per
//! writer stream ([`Store::put_chunk`], read back with [`Store::chunk`]). The crate is generic: columns are named `i64`
//! vectors and JSON fields are `serde_json::Value`s; the meaning belongs to the callers.
//!
//! Each run (schema 5) and experiment (schema 6) records the process that began it (pid and
//! start time): one left `running` by a process that died is marked `abandoned` by
//! [`Store::mark_abandoned`] (a writer, when it opens the store) and reads as such meanwhile.
//!
//! The default file is [`default_path`] (`$TAILSCOPE_DB`, else
//! `$XDG_DATA_HOME/tailscope/runs.db`, else `~/.local/share/tailscope/runs.db`). Stored runs
//! leave as CSV ([`export_csv`]) or JSON ([`export_json`]).

mod chunks;
mod codec;
mod columns;
mod db;
mod error;
mod experiments;
mod export;
mod owner;
mod paths;
mod status;
mod time;

pub use chunks::{decode as decode_chunk, encode as encode_chunk, StreamInfo};
pub use columns::Columns;
pub use db::{Abandoned, NewRun, RunBlob, RunRow, Store, OLDEST_READABLE_SCHEMA, SCHEMA_VERSION};
pub use error::StoreError;
pub use experiments::{ExperimentRow, NewExperiment};
pub use export::{export_csv, export_csv_header, export_csv_rows, export_json};
pub use paths::{default_path, DEFAULT_DB_ENV};
pub use status::RowStatus;
pub use time::{civil_from_days, now_rfc3339, rfc3339_utc};
