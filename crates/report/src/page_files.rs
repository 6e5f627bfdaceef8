//! The files of `tailscope report`: the HTML page and, with `--png DIR`, each of its figures
//! as PNG. Every path is checked before anything is read or built ([`PageFiles::check`],
//! [`PageFiles::check_figures`]); the writing is all or nothing ([`PageFiles::write`]).

use std::path::{Path, PathBuf};

use crate::files::{check_not_the_store, check_writable, same_file, FileError};
use crate::html::Report;

/// Where a page and its figures go, and the store they must not overwrite.
pub struct PageFiles<'a> {
    pub output: &'a Path,
    pub png: Option<&'a Path>,
    pub db: &'a Path,
}

fn create_err(p: &Path, source: std::io::Error) -> FileError {
    FileError::Create {
        path: p.display().to_string(),
        source,
    }
}

impl PageFiles<'_> {
    /// The page's file and the figures' directory: an existing directory we may create
    /// files in, or a new one whose parent is.
    pub fn check(&self) -> Result<(), FileError> {
        check_writable("--output", self.output)?;
        check_not_the_store("--output", self.output, self.db)?;
        let Some(d) = self.png else { return Ok(()) };
        let refused = |why: String| FileError::Refused(format!("--png {}: {why}", d.display()));
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => check_writable("--png", &d.join("<figure>.png")),
            Ok(_) => Err(refused("is not a directory".into())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => check_writable("--png", d),
            Err(e) => Err(refused(e.to_string())),
        }
    }

    /// The PNG file of each figure of `page` (none without `--png`), each checked: writable,
    /// not the store, not the page itself.
    pub fn check_figures<'p>(
        &self,
        page: &'p Report,
    ) -> Result<Vec<(PathBuf, &'p crate::figure::Figure)>, FileError> {
        let Some(d) = self.png else {
            return Ok(Vec::new());
        };
        let pngs: Vec<_> = page
            .figures
            .iter()
            .map(|f| (d.join(format!("{}.png", f.name)), f))
            .collect();
        for (p, _) in &pngs {
            if p.exists() {
                check_writable("--png", p)?;
            }
            check_not_the_store("--png", p, self.db)?;
            if same_file(p, self.output) {
                return Err(FileError::Refused(format!(
                    "--output {} is also a figure of --png",
                    self.output.display()
                )));
            }
        }
        Ok(pngs)
    }

    /// Writes the page and the figures `check_figures` named; on a failure, removes every
    /// file (and the directory) it created. Returns the paths written, the page first.
    pub fn write(
        &self,
        html: &str,
        pngs: &[(PathBuf, &crate::figure::Figure)],
    ) -> Result<Vec<String>, FileError> {
        let mut created = Vec::new();
        let mut made_dir = None;
        let written = self.write_all(html, pngs, &mut created, &mut made_dir);
        if written.is_err() {
            for p in created.iter().rev() {
                let _ = std::fs::remove_file(p);
            }
            if let Some(d) = made_dir {
                let _ = std::fs::remove_dir(d);
            }
        }
        written
    }

    fn write_all(
        &self,
        html: &str,
        pngs: &[(PathBuf, &crate::figure::Figure)],
        created: &mut Vec<PathBuf>,
        made_dir: &mut Option<PathBuf>,
    ) -> Result<Vec<String>, FileError> {
        let mut written = Vec::new();
        if !self.output.exists() {
            created.push(self.output.to_path_buf());
        }
        std::fs::write(self.output, html).map_err(|e| create_err(self.output, e))?;
        written.push(self.output.display().to_string());
        if let Some(d) = self.png {
            if !d.exists() {
                std::fs::create_dir(d).map_err(|e| create_err(d, e))?;
                *made_dir = Some(d.to_path_buf());
            }
        }
        for (p, f) in pngs {
            if !p.exists() {
                created.push(p.clone());
            }
            f.png(p)?;
            written.push(p.display().to_string());
        }
        Ok(written)
    }
}
