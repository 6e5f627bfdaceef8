//! `Store`: the SQLite file, its schema and migrations, and the run/column operations.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::owner::{self, Owner};
use crate::{codec, time, Columns, RowStatus, StoreError};

/// The schema this build writes, kept in SQLite's `user_version`. Version 0 is an empty
/// file. The migration step `n -> n + 1` is the `n`-th entry of the private `MIGRATIONS`.
pub const SCHEMA_VERSION: i64 = 6;

/// The oldest schema [`Store::open_existing`] reads as it is (what it lacks reads as absent:
/// a schema-3 file has no typed runs). Older files must be migrated by a command that writes.
pub const OLDEST_READABLE_SCHEMA: i64 = 3;

/// Largest typed run [`Store::typed_run`] inflates (a damaged or foreign blob must not
/// exhaust memory).
const MAX_TYPED_RUN_BYTES: u64 = 1 << 30;

const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 0 -> 1: runs and their raw-record columns.
    "CREATE TABLE runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        kind        TEXT NOT NULL,
        status      TEXT NOT NULL,
        target      TEXT NOT NULL,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        config      TEXT NOT NULL,
        host        TEXT NOT NULL,
        summary     TEXT,
        requests    INTEGER
    );
    CREATE TABLE columns (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        ord    INTEGER NOT NULL,
        name   TEXT NOT NULL,
        data   BLOB NOT NULL,
        PRIMARY KEY (run_id, ord),
        UNIQUE (run_id, name)
    );",
    // 1 -> 2: records streamed during a run, in chunks per writer stream (see `chunks`).
    "CREATE TABLE chunks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        stream INTEGER NOT NULL,
        seq    INTEGER NOT NULL,
        len    INTEGER NOT NULL,
        data   BLOB NOT NULL,
        PRIMARY KEY (run_id, stream, seq)
    );",
    // 2 -> 3: experiments (loops over runs) and the experiment each run belongs to.
    "CREATE TABLE experiments (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        kind        TEXT NOT NULL,
        status      TEXT NOT NULL,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        config      TEXT NOT NULL,
        summary     TEXT
    );
    ALTER TABLE runs ADD COLUMN experiment_id INTEGER REFERENCES experiments(id);",
    // 3 -> 4: a finished run's typed form, as its producer (lab) encoded it: `version` is
    // that encoding's version, `data` its bytes compressed with zstd. Runs stored before
    // have none, and keep their JSON summary.
    "CREATE TABLE typed_runs (
        run_id  INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        version INTEGER NOT NULL,
        data    BLOB NOT NULL
    );",
    // 4 -> 5: the process that began a run (pid, and its start time: field 22 of
    // /proc/PID/stat), so a run whose process died without finishing it can be marked
    // abandoned. Runs begun before have none and are never judged.
    "ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_start INTEGER;",
    // 5 -> 6: the same of an experiment (a sweep killed by SIGKILL is marked too).
    "ALTER TABLE experiments ADD COLUMN owner_pid INTEGER;
    ALTER TABLE experiments ADD COLUMN owner_start INTEGER;",
];

/// A run or an experiment [`Store::mark_abandoned`] found orphaned and marked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abandoned {
    /// Whether it is an experiment (else a run).
    pub experiment: bool,
    pub id: i64,
    pub kind: String,
    /// A run's target ("" for an experiment).
    pub target: String,
    /// When it began (RFC 3339 UTC).
    pub started_at: String,
}

/// How long a writer waits for another process's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What is known of a run when it starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewRun {
    /// What produced it: "run", "calibrate", "sweep", ...
    pub kind: String,
    /// The target as the user named it (address, or "builtin").
    pub target: String,
    /// RFC 3339 UTC start time, e.g. from [`crate::now_rfc3339`].
    pub started_at: String,
    /// The validated configuration the run executed.
    pub config: serde_json::Value,
    /// The host snapshot taken before the run.
    pub host: serde_json::Value,
}

/// One stored run, as listed and shown.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub kind: String,
    /// [`RowStatus::Running`] until [`Store::finish_run`] records the outcome ("ok",
    /// "failed", ...); [`RowStatus::Abandoned`] when the process that began it is gone and
    /// never finished it. A run still running is in progress, or was begun by a build
    /// before schema 5, which recorded no owner.
    pub status: RowStatus,
    pub target: String,
    pub started_at: String,
    /// RFC 3339 UTC time `finish_run` was called.
    pub finished_at: Option<String>,
    pub config: serde_json::Value,
    pub host: serde_json::Value,
    /// The analysis summary given to `finish_run`.
    pub summary: Option<serde_json::Value>,
    /// Number of raw per-request records stored with [`Store::put_columns`] or
    /// [`Store::put_chunk`]; `None` when none were kept.
    pub requests: Option<i64>,
}

/// A run's typed form as stored: opaque bytes and the version of their encoding. The store
/// does not read them; the crate that owns the type (lab) encodes and decodes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunBlob {
    /// The encoding's version, chosen by the producer.
    pub version: i64,
    pub data: Vec<u8>,
}

/// The results store: one SQLite database (WAL mode), shared safely between processes.
pub struct Store {
    pub(crate) conn: Connection,
    /// The schema of the open file: [`SCHEMA_VERSION`], or older when opened read-only by
    /// [`Store::open_existing`].
    pub(crate) schema: i64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.conn.path())
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed, with its parent directories) the store at `path`, switches
    /// it to WAL, and brings its schema up to [`SCHEMA_VERSION`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // SQLite opens a file it may not write read-only without a word, and the first write
        // fails, after a measurement: find it now. A write lock taken and given back (nothing
        // written) also finds an immutable file or a directory the journal cannot go into.
        // SQLite opens the file at its first use: read it once, then ask.
        conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0))?;
        if conn.is_readonly(rusqlite::DatabaseName::Main)? {
            return Err(StoreError::ReadOnly(path.to_path_buf()));
        }
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK") {
            use rusqlite::ErrorCode as C;
            return Err(match &e {
                rusqlite::Error::SqliteFailure(f, _)
                    if matches!(f.code, C::ReadOnly | C::CannotOpen | C::PermissionDenied) =>
                {
                    StoreError::ReadOnly(path.to_path_buf())
                }
                _ => e.into(),
            });
        }
        // WAL lets readers (`tailscope report`) run beside a writing `tailscope run`.
        // Switching the journal mode needs an exclusive lock, and SQLite reports SQLITE_BUSY
        // for it at once, without calling the busy handler, when another process is opening
        // (and switching) the same fresh file: retry for as long as the busy timeout.
        let started = std::time::Instant::now();
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Corrupt(format!(
                "cannot switch {} to WAL (journal mode {mode})",
                path.display()
            )));
        }
        Self::setup(conn)
    }

    /// Opens the store at `path` for reading only, for commands that must not create or
    /// change anything (`runs list`, `show`, `export`). `Ok(None)` when there is no store
    /// there: no file, or a file without tailscope's schema (such as an empty one). Never
    /// creates the file or its directory and never migrates; the connection is `query_only`.
    ///
    /// The connection is read-write at the SQLite level on purpose: in WAL mode every reader
    /// needs the `-wal` and `-shm` files, and a `SQLITE_OPEN_READ_ONLY` connection creates
    /// them but, unable to checkpoint, leaves them behind, while a read-write one removes them
    /// when it is the last to close. When they cannot be created (a store in someone else's
    /// or a read-only directory) and no `-wal` holds writes not yet in the file, the file is
    /// read as immutable: then no writer can exist, since a writer must create the `-wal`.
    pub fn open_existing(path: &Path) -> Result<Option<Store>, StoreError> {
        use rusqlite::{ErrorCode, OpenFlags};
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let version = |c: &Connection| c.query_row("PRAGMA user_version", [], |r| r.get(0));
        // No SQLITE_OPEN_CREATE: a file removed since the check above is an error, not a
        // new empty store.
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let (conn, found): (Connection, i64) = match version(&conn) {
            Ok(v) => (conn, v),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(e.code, ErrorCode::ReadOnly | ErrorCode::CannotOpen)
                    && !Path::new(&wal).exists() =>
            {
                // A URI names the file, so '%', '?' and '#' in its path must be escaped.
                let Some(p) = path.to_str() else {
                    return Err(rusqlite::Error::SqliteFailure(e, None).into());
                };
                let escaped = p
                    .replace('%', "%25")
                    .replace('?', "%3f")
                    .replace('#', "%23");
                let c = Connection::open_with_flags(
                    format!("file:{escaped}?immutable=1"),
                    OpenFlags::SQLITE_OPEN_READ_ONLY
                        | OpenFlags::SQLITE_OPEN_URI
                        | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                let v = version(&c)?;
                (c, v)
            }
            Err(e) => return Err(e.into()),
        };
        conn.pragma_update(None, "query_only", true)?;
        match found {
            0 => Ok(None),
            f if (OLDEST_READABLE_SCHEMA..=SCHEMA_VERSION).contains(&f) => {
                Ok(Some(Store { conn, schema: f }))
            }
            f if f > SCHEMA_VERSION => Err(StoreError::SchemaTooNew {
                found: f,
                supported: SCHEMA_VERSION,
            }),
            f => Err(StoreError::Corrupt(format!(
                "schema version {f} predates this build's {SCHEMA_VERSION}; a command that \
                 writes (tailscope run) migrates it"
            ))),
        }
    }

    /// A private, empty store that vanishes when dropped (tests, `--no-store` runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        Self::setup(Connection::open_in_memory()?)
    }

    fn setup(mut conn: Connection) -> Result<Store, StoreError> {
        conn.pragma_update(None, "foreign_keys", true)?;
        // NORMAL is durable across application crashes in WAL mode; only a power loss can
        // drop the last transactions, never corrupt the file.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        migrate(&mut conn)?;
        Ok(Store {
            conn,
            schema: SCHEMA_VERSION,
        })
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Inserts a run at its start, with status "running" and this process as its owner;
    /// returns its id. Ids are never reused, even after [`Store::delete_run`].
    pub fn begin_run(&self, r: &NewRun) -> Result<i64, StoreError> {
        let owner = Owner::current();
        self.conn.execute(
            "INSERT INTO runs (kind, status, target, started_at, config, host, owner_pid,
                               owner_start)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                r.kind,
                r.target,
                r.started_at,
                serde_json::to_string(&r.config)?,
                serde_json::to_string(&r.host)?,
                owner.map(|o| o.pid),
                owner.map(|o| o.start),
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records a run's outcome (the producer's text, which reads back as
    /// [`RowStatus::Finished`]) and summary and stamps `finished_at` with the current time.
    pub fn finish_run(
        &self,
        id: i64,
        outcome: &str,
        summary: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.finish_row("runs", id, outcome, summary)
    }

    /// [`Store::finish_run`] and the run's typed form, in one transaction: a reader sees
    /// both or neither.
    pub fn finish_run_typed(
        &self,
        id: i64,
        outcome: &str,
        summary: &serde_json::Value,
        typed: &RunBlob,
    ) -> Result<(), StoreError> {
        let summary = serde_json::to_string(summary)?;
        // Compress before taking the write lock.
        let data = zstd::bulk::compress(&typed.data, codec::ZSTD_LEVEL)?;
        let tx = self.write_tx()?;
        let n = tx.execute(
            "UPDATE runs SET status = ?2, summary = ?3, finished_at = ?4 WHERE id = ?1",
            params![id, outcome, summary, time::now_rfc3339()],
        )?;
        if n == 0 {
            return Err(StoreError::UnknownRun(id));
        }
        tx.execute(
            "INSERT OR REPLACE INTO typed_runs (run_id, version, data) VALUES (?1, ?2, ?3)",
            params![id, typed.version, data],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Run `id`'s typed form; `None` when it has none (stored before schema 4, never
    /// finished, or finished without one) or the file's schema predates it.
    pub fn typed_run(&self, id: i64) -> Result<Option<RunBlob>, StoreError> {
        if self.schema < 4 {
            return Ok(None);
        }
        let row: Option<(i64, Vec<u8>)> = self
            .conn
            .query_row(
                "SELECT version, data FROM typed_runs WHERE run_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((version, blob)) = row else {
            return Ok(None);
        };
        let corrupt =
            |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("run {id}: typed run: {e}"));
        let mut data = Vec::new();
        zstd::stream::read::Decoder::new(blob.as_slice())
            .and_then(|d| d.take(MAX_TYPED_RUN_BYTES + 1).read_to_end(&mut data))
            .map_err(|e| corrupt(&e))?;
        if data.len() as u64 > MAX_TYPED_RUN_BYTES {
            return Err(corrupt(&format!(
                "inflates beyond {MAX_TYPED_RUN_BYTES} bytes"
            )));
        }
        Ok(Some(RunBlob { version, data }))
    }

    /// Sets the outcome, summary and `finished_at` of row `id` of `table` (runs or
    /// experiments, whose finishing columns are the same).
    pub(crate) fn finish_row(
        &self,
        table: &'static str,
        id: i64,
        outcome: &str,
        summary: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let n = self.conn.execute(
            &format!(
                "UPDATE {table} SET status = ?2, summary = ?3, finished_at = ?4 WHERE id = ?1"
            ),
            params![
                id,
                outcome,
                serde_json::to_string(summary)?,
                time::now_rfc3339()
            ],
        )?;
        if n == 0 {
            return Err(StoreError::UnknownRun(id));
        }
        Ok(())
    }

    /// Stores a run's raw per-request records, replacing any stored before. Each column
    /// becomes one compressed blob (see the `codec` module); all or none are written.
    pub fn put_columns(&self, id: i64, cols: &Columns) -> Result<(), StoreError> {
        cols.validate()?;
        let len = i64::try_from(cols.len)
            .map_err(|_| StoreError::Corrupt("record count exceeds i64".into()))?;
        // Compress before taking the write lock, so other writers wait only for the inserts.
        let blobs = cols
            .cols
            .iter()
            .map(|(name, v)| Ok((name.as_str(), codec::encode(v)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let tx = self.write_tx()?;
        let n = tx.execute(
            "UPDATE runs SET requests = ?2 WHERE id = ?1",
            params![id, len],
        )?;
        if n == 0 {
            return Err(StoreError::UnknownRun(id));
        }
        tx.execute("DELETE FROM columns WHERE run_id = ?1", [id])?;
        {
            let mut ins = tx
                .prepare("INSERT INTO columns (run_id, ord, name, data) VALUES (?1, ?2, ?3, ?4)")?;
            for (ord, (name, blob)) in blobs.iter().enumerate() {
                ins.execute(params![id, ord as i64, name, blob])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// A run's raw records; `None` when the run is unknown or kept none.
    pub fn columns(&self, id: i64) -> Result<Option<Columns>, StoreError> {
        // One read transaction, so a concurrent `put_columns` is seen whole or not at all.
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)?;
        let requests: Option<Option<i64>> = tx
            .query_row("SELECT requests FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        let Some(Some(requests)) = requests else {
            return Ok(None);
        };
        let len = usize::try_from(requests)
            .map_err(|_| StoreError::Corrupt(format!("run {id}: record count {requests}")))?;
        let mut out = Columns::new(len);
        let mut q = tx.prepare("SELECT name, data FROM columns WHERE run_id = ?1 ORDER BY ord")?;
        let mut rows = q.query([id])?;
        while let Some(row) = rows.next()? {
            let name: String = row.get(0)?;
            let blob: Vec<u8> = row.get(1)?;
            let v = codec::decode(&blob, len).map_err(|e| match e {
                StoreError::Corrupt(m) => {
                    StoreError::Corrupt(format!("run {id}, column {name:?}: {m}"))
                }
                other => other,
            })?;
            out.push_column(&name, v)?;
        }
        Ok(Some(out))
    }

    /// All runs, newest (most recently begun) first. A `running` run whose owner is gone
    /// reads as [`RowStatus::Abandoned`] (the row is not changed).
    pub fn list_runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let mut q = self.conn.prepare(&format!(
            "SELECT {} FROM runs ORDER BY id DESC",
            self.run_columns()
        ))?;
        let raw = q
            .query_map([], RawRun::from_row)?
            .collect::<Result<Vec<_>, _>>()?;
        raw.into_iter().map(RawRun::parse).collect()
    }

    /// One run by id, its status read as by [`Store::list_runs`].
    pub fn get_run(&self, id: i64) -> Result<Option<RunRow>, StoreError> {
        self.conn
            .query_row(
                &format!("SELECT {} FROM runs WHERE id = ?1", self.run_columns()),
                [id],
                RawRun::from_row,
            )
            .optional()?
            .map(RawRun::parse)
            .transpose()
    }

    /// The columns [`RawRun::from_row`] reads; a file older than schema 5 has no owners.
    fn run_columns(&self) -> String {
        let owner = if self.schema >= 5 {
            "owner_pid, owner_start"
        } else {
            "NULL, NULL"
        };
        format!("{RUN_COLUMNS}, {owner}")
    }

    /// Marks [`RowStatus::Abandoned`] every `running` run whose owning process is gone (no such
    /// pid, a zombie, or a pid now held by a process that started at another time) and
    /// returns them, oldest first. Runs with no recorded owner are left alone. A writing
    /// command calls it when it opens the store; it takes the write lock only when there is
    /// something to mark.
    pub fn mark_abandoned(&self) -> Result<Vec<Abandoned>, StoreError> {
        self.mark_abandoned_by(&owner::live_start_of)
    }

    /// [`Store::mark_abandoned`] against the process table `start_of` (pid -> start time
    /// of a live process).
    pub(crate) fn mark_abandoned_by(
        &self,
        start_of: &dyn Fn(i64) -> Option<i64>,
    ) -> Result<Vec<Abandoned>, StoreError> {
        let mut marked = Vec::new();
        if self.schema >= 6 {
            marked = self.mark_orphans("experiments", "''", start_of)?;
        }
        if self.schema >= 5 {
            marked.extend(self.mark_orphans("runs", "target", start_of)?);
        }
        Ok(marked)
    }

    /// [`Store::mark_abandoned_by`] of one table (`runs` or `experiments`); `target` is the
    /// column (or literal) that gives an orphan's target.
    fn mark_orphans(
        &self,
        table: &'static str,
        target: &'static str,
        start_of: &dyn Fn(i64) -> Option<i64>,
    ) -> Result<Vec<Abandoned>, StoreError> {
        let mut q = self.conn.prepare(&format!(
            "SELECT id, kind, {target}, started_at, owner_pid, owner_start FROM {table}
             WHERE status = 'running' AND owner_pid IS NOT NULL AND owner_start IS NOT NULL
             ORDER BY id"
        ))?;
        let orphans = q
            .query_map([], |r| {
                let run = Abandoned {
                    experiment: table == "experiments",
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    target: r.get(2)?,
                    started_at: r.get(3)?,
                };
                Ok((
                    run,
                    Owner {
                        pid: r.get(4)?,
                        start: r.get(5)?,
                    },
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|(_, o)| !o.alive_by(start_of))
            .map(|(run, _)| run)
            .collect::<Vec<_>>();
        if orphans.is_empty() {
            return Ok(orphans);
        }
        let tx = self.write_tx()?;
        let mut marked = Vec::with_capacity(orphans.len());
        for run in orphans {
            // Another writer may have marked (or its owner finished) it meanwhile.
            let n = tx.execute(
                &format!(
                    "UPDATE {table} SET status = 'abandoned' WHERE id = ?1 AND status = 'running'"
                ),
                [run.id],
            )?;
            if n == 1 {
                marked.push(run);
            }
        }
        tx.commit()?;
        Ok(marked)
    }

    /// Deletes a run and its records; `false` when there was no such run.
    pub fn delete_run(&self, id: i64) -> Result<bool, StoreError> {
        let tx = self.write_tx()?;
        tx.execute("DELETE FROM columns WHERE run_id = ?1", [id])?;
        tx.execute("DELETE FROM chunks WHERE run_id = ?1", [id])?;
        tx.execute("DELETE FROM typed_runs WHERE run_id = ?1", [id])?;
        let n = tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// A write transaction that takes the write lock up front (waiting up to the busy
    /// timeout), instead of failing on a lock upgrade when another process wrote meanwhile.
    pub(crate) fn write_tx(&self) -> Result<Transaction<'_>, StoreError> {
        Ok(Transaction::new_unchecked(
            &self.conn,
            TransactionBehavior::Immediate,
        )?)
    }
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    // Immediate: two processes opening a fresh file must not both create the tables.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found < 0 {
        return Err(StoreError::Corrupt(format!("schema version {found}")));
    }
    for step in &MIGRATIONS[found as usize..] {
        tx.execute_batch(step)?;
    }
    if found < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(())
}

const RUN_COLUMNS: &str =
    "id, kind, status, target, started_at, finished_at, config, host, summary, requests";

/// A `runs` row before its JSON texts are parsed (parsing errors are ours, not SQLite's).
struct RawRun {
    id: i64,
    kind: String,
    status: RowStatus,
    target: String,
    started_at: String,
    finished_at: Option<String>,
    config: String,
    host: String,
    summary: Option<String>,
    requests: Option<i64>,
    owner: Option<Owner>,
}

impl RawRun {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<RawRun> {
        Ok(RawRun {
            id: r.get(0)?,
            kind: r.get(1)?,
            status: r.get(2)?,
            target: r.get(3)?,
            started_at: r.get(4)?,
            finished_at: r.get(5)?,
            config: r.get(6)?,
            host: r.get(7)?,
            summary: r.get(8)?,
            requests: r.get(9)?,
            owner: match (r.get(10)?, r.get(11)?) {
                (Some(pid), Some(start)) => Some(Owner { pid, start }),
                _ => None,
            },
        })
    }

    fn parse(self) -> Result<RunRow, StoreError> {
        let id = self.id;
        let status = owner::status_as_read(self.status, self.owner);
        let json = |field: &str, text: &str| {
            serde_json::from_str(text)
                .map_err(|e| StoreError::Corrupt(format!("run {id}: {field}: {e}")))
        };
        Ok(RunRow {
            config: json("config", &self.config)?,
            host: json("host", &self.host)?,
            summary: self
                .summary
                .as_deref()
                .map(|s| json("summary", s))
                .transpose()?,
            id,
            kind: self.kind,
            status,
            target: self.target,
            started_at: self.started_at,
            finished_at: self.finished_at,
            requests: self.requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_run() -> NewRun {
        NewRun {
            kind: "run".into(),
            target: "builtin".into(),
            started_at: "2026-11-26T04:00:00.000Z".into(),
            config: serde_json::json!({}),
            host: serde_json::json!({}),
        }
    }

    fn set_owner(st: &Store, id: i64, pid: Option<i64>, start: Option<i64>) {
        st.conn
            .execute(
                "UPDATE runs SET owner_pid = ?2, owner_start = ?3 WHERE id = ?1",
                params![id, pid, start],
            )
            .unwrap();
    }

    /// The status as stored (the column's text), not as read.
    fn stored_status(st: &Store, id: i64) -> String {
        st.conn
            .query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn begin_run_records_this_process_as_owner() {
        let st = Store::open_in_memory().unwrap();
        let id = st.begin_run(&new_run()).unwrap();
        let (pid, start): (i64, i64) = st
            .conn
            .query_row(
                "SELECT owner_pid, owner_start FROM runs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(Some(Owner { pid, start }), Owner::current());
        assert!(st.mark_abandoned().unwrap().is_empty(), "its owner runs");
        assert_eq!(st.get_run(id).unwrap().unwrap().status, RowStatus::Running);
    }

    #[test]
    fn runs_of_dead_owners_are_marked_once_and_the_rest_kept() {
        let st = Store::open_in_memory().unwrap();
        let table = |pid: i64| match pid {
            10 => Some(500),
            _ => None,
        };
        let live = st.begin_run(&new_run()).unwrap();
        set_owner(&st, live, Some(10), Some(500));
        let gone = st.begin_run(&new_run()).unwrap();
        set_owner(&st, gone, Some(11), Some(500));
        let reused = st.begin_run(&new_run()).unwrap();
        set_owner(&st, reused, Some(10), Some(499));
        let finished = st.begin_run(&new_run()).unwrap();
        set_owner(&st, finished, Some(11), Some(500));
        st.finish_run(finished, "ok", &serde_json::json!({}))
            .unwrap();
        let unknown = st.begin_run(&new_run()).unwrap();
        set_owner(&st, unknown, None, None);

        let marked = st.mark_abandoned_by(&table).unwrap();
        let ids: Vec<i64> = marked.iter().map(|a| a.id).collect();
        assert_eq!(ids, [gone, reused]);
        assert_eq!(marked[0].started_at, "2026-11-26T04:00:00.000Z");
        assert_eq!(stored_status(&st, gone), "abandoned");
        assert_eq!(stored_status(&st, reused), "abandoned");
        assert_eq!(stored_status(&st, live), "running");
        assert_eq!(stored_status(&st, finished), "ok");
        assert_eq!(stored_status(&st, unknown), "running");
        assert!(st.mark_abandoned_by(&table).unwrap().is_empty(), "once");
    }

    #[test]
    fn a_read_reports_a_dead_owner_without_changing_the_row() {
        let st = Store::open_in_memory().unwrap();
        let id = st.begin_run(&new_run()).unwrap();
        let me = Owner::current().unwrap();
        // This pid, another start time: a process that reused the owner's pid.
        set_owner(&st, id, Some(me.pid), Some(me.start + 1));
        assert_eq!(
            st.get_run(id).unwrap().unwrap().status,
            RowStatus::Abandoned
        );
        assert_eq!(st.list_runs().unwrap()[0].status, RowStatus::Abandoned);
        assert_eq!(stored_status(&st, id), "running");
        assert_eq!(st.mark_abandoned().unwrap().len(), 1);
        assert_eq!(stored_status(&st, id), "abandoned");
    }
}
