//! File operations of the store, each passing through the failpoint hook and
//! turning `io::Error` into a [`LogError`] that names the path.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::config::{IoOp, LogConfig};
use super::error::{LogError, Result};

/// Creates (or truncates) a file for reading and writing.
pub(crate) fn create(cfg: &LogConfig, path: &Path) -> Result<File> {
    cfg.fail(IoOp::Create, path)
        .map_err(|e| LogError::io("create", path, e))?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| LogError::io("create", path, e))
}

/// Opens an existing file, writable unless `read_only`.
pub(crate) fn open(path: &Path, read_only: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(!read_only)
        .open(path)
        .map_err(|e| LogError::io("open", path, e))
}

/// Writes all of `buf` at `pos`. A failing write (real or injected) may leave a
/// prefix of `buf` in the file; callers truncate it away.
pub(crate) fn write_at(
    cfg: &LogConfig,
    file: &File,
    path: &Path,
    buf: &[u8],
    pos: u64,
) -> Result<()> {
    if let Err(e) = cfg.fail(IoOp::Write, path) {
        let half = &buf[..buf.len() / 2];
        let _ = file.write_all_at(half, pos);
        return Err(LogError::io("write", path, e));
    }
    file.write_all_at(buf, pos)
        .map_err(|e| LogError::io("write", path, e))
}

/// Reads exactly `buf.len()` bytes at `pos`.
pub(crate) fn read_at(file: &File, path: &Path, buf: &mut [u8], pos: u64) -> Result<()> {
    file.read_exact_at(buf, pos)
        .map_err(|e| LogError::io("read", path, e))
}

/// fdatasync.
pub(crate) fn sync_data(cfg: &LogConfig, file: &File, path: &Path) -> Result<()> {
    cfg.fail(IoOp::Sync, path)
        .map_err(|e| LogError::io("fdatasync", path, e))?;
    file.sync_data()
        .map_err(|e| LogError::io("fdatasync", path, e))
}

/// fsync of a directory, so that files created or removed in it persist.
pub(crate) fn sync_dir(cfg: &LogConfig, dir: &Path) -> Result<()> {
    cfg.fail(IoOp::Sync, dir)
        .map_err(|e| LogError::io("fsync directory", dir, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io("fsync directory", dir, e))
}

/// Truncates (or extends) a file to `len` bytes.
pub(crate) fn set_len(cfg: &LogConfig, file: &File, path: &Path, len: u64) -> Result<()> {
    cfg.fail(IoOp::Truncate, path)
        .map_err(|e| LogError::io("truncate", path, e))?;
    file.set_len(len)
        .map_err(|e| LogError::io("truncate", path, e))
}

/// Deletes a file; one already gone is not an error.
pub(crate) fn remove(cfg: &LogConfig, path: &Path) -> Result<()> {
    cfg.fail(IoOp::Remove, path)
        .map_err(|e| LogError::io("remove", path, e))?;
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LogError::io("remove", path, e)),
        _ => Ok(()),
    }
}

/// Creates a directory and its parents.
pub(crate) fn create_dir_all(cfg: &LogConfig, dir: &Path) -> Result<()> {
    cfg.fail(IoOp::Create, dir)
        .map_err(|e| LogError::io("create directory", dir, e))?;
    fs::create_dir_all(dir).map_err(|e| LogError::io("create directory", dir, e))
}
