//! File operations of the store, each passing through the failpoint hook and
//! turning `io::Error` into a [`LogError`] that names the path.

use std::fs::{self, File, OpenOptions};
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use super::config::{IoOp, LogConfig};
use super::error::{LogError, Result};

/// Segment files open in this process, over every log (two stores in one
/// process share one open-files limit).
static PROCESS_OPEN: AtomicUsize = AtomicUsize::new(0);

/// Segment files open now in this process, over every log.
pub fn process_open_files() -> usize {
    PROCESS_OPEN.load(Relaxed)
}

/// Logs open in this process.
static LOGS: AtomicUsize = AtomicUsize::new(0);

/// Logs open now in this process (at least 1 once one is).
pub fn process_logs() -> usize {
    LOGS.load(Relaxed).max(1)
}

/// Counts its log in [`process_logs`] while it lives.
#[derive(Debug)]
pub struct LogCount(());

impl LogCount {
    pub fn new() -> Self {
        LOGS.fetch_add(1, Relaxed);
        LogCount(())
    }
}

impl Drop for LogCount {
    fn drop(&mut self) {
        LOGS.fetch_sub(1, Relaxed);
    }
}

/// How many of a log's segment files are open (see [`CountedFile`]), and the
/// most there ever were at once; every file also counts in
/// [`process_open_files`].
#[derive(Debug, Clone, Default)]
pub struct Gauge(Arc<(AtomicUsize, AtomicUsize)>);

impl Gauge {
    /// Files open now.
    pub fn get(&self) -> usize {
        self.0 .0.load(Relaxed)
    }

    /// The most files open at once so far.
    pub fn peak(&self) -> usize {
        self.0 .1.load(Relaxed)
    }

    /// Counts `file` as open until the returned handle is dropped.
    pub fn track(&self, file: File) -> CountedFile {
        let now = self.0 .0.fetch_add(1, Relaxed) + 1;
        self.0 .1.fetch_max(now, Relaxed);
        PROCESS_OPEN.fetch_add(1, Relaxed);
        CountedFile {
            file,
            gauge: self.clone(),
        }
    }
}

/// A segment file counted in its log's [`Gauge`] while open, so the log can
/// keep its descriptors under the process's limit.
#[derive(Debug)]
pub struct CountedFile {
    file: File,
    gauge: Gauge,
}

impl Deref for CountedFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for CountedFile {
    fn drop(&mut self) {
        self.gauge.0 .0.fetch_sub(1, Relaxed);
        PROCESS_OPEN.fetch_sub(1, Relaxed);
    }
}

/// Raises this process's soft limit on open files to its hard limit, once.
///
/// The log keeps a descriptor per partition written recently (its active
/// segment), up to [`LogConfig::max_open_files`], by default half this limit:
/// every Spark task, every producer run, is a new partition, and the usual
/// soft limit of 1024 (256 on some systems) would leave room for few.
/// Servers commonly lift the soft limit this way (the Go runtime does it at
/// start-up); the hard limit stays the operator's bound. Returns the soft
/// limit now in force.
pub fn raise_open_files_limit() -> u64 {
    static RAISED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RAISED.get_or_init(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read or write the struct we pass.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return 0;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
                tracing::debug!("open files limit raised from {before} to {}", lim.rlim_cur);
                return lim.rlim_cur;
            }
            tracing::warn!(
                "cannot raise the open files limit from {before}: {}",
                std::io::Error::last_os_error()
            );
        }
        before
    })
}

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

/// Writes the concatenation of `parts` at `pos` with `pwritev` (no copying into
/// one buffer). Like [`write_at`], a failure may leave a prefix in the file.
pub(crate) fn write_vectored_at(
    cfg: &LogConfig,
    file: &File,
    path: &Path,
    parts: &[&[u8]],
    pos: u64,
) -> Result<()> {
    if let Err(e) = cfg.fail(IoOp::Write, path) {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let half: Vec<u8> = parts.concat().into_iter().take(total / 2).collect();
        let _ = file.write_all_at(&half, pos);
        return Err(LogError::io("write", path, e));
    }
    const IOV_MAX: usize = 1024;
    let fd = file.as_raw_fd();
    let (mut i, mut off, mut pos) = (0usize, 0usize, pos);
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(parts.len().min(IOV_MAX));
    loop {
        while i < parts.len() && off == parts[i].len() {
            i += 1;
            off = 0;
        }
        if i == parts.len() {
            return Ok(());
        }
        iov.clear();
        for (k, p) in parts[i..].iter().take(IOV_MAX).enumerate() {
            let p = if k == 0 { &p[off..] } else { p };
            iov.push(libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            });
        }
        // SAFETY: every iovec points into a slice borrowed for this call.
        let n = unsafe {
            libc::pwritev(
                fd,
                iov.as_ptr(),
                iov.len() as libc::c_int,
                pos as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LogError::io("write", path, e));
        }
        if n == 0 {
            return Err(LogError::io(
                "write",
                path,
                std::io::ErrorKind::WriteZero.into(),
            ));
        }
        let mut n = n as usize;
        pos += n as u64;
        while n > 0 {
            let rem = parts[i].len() - off;
            if n >= rem {
                n -= rem;
                i += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
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

/// fdatasync of the file at `path` through a descriptor opened for it: the
/// kernel writes back the file's dirty pages whichever descriptor wrote them,
/// so a sync holds one descriptor at a time however many files it covers. A
/// file deleted since (retention) has nothing left to sync.
pub(crate) fn sync_path(cfg: &LogConfig, path: &Path) -> Result<()> {
    cfg.fail(IoOp::Sync, path)
        .map_err(|e| LogError::io("fdatasync", path, e))?;
    match File::open(path) {
        Ok(f) => f
            .sync_data()
            .map_err(|e| LogError::io("fdatasync", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io("open for fdatasync", path, e)),
    }
}

/// fsync of a directory, so that files created or removed in it persist.
pub(crate) fn sync_dir(cfg: &LogConfig, dir: &Path) -> Result<()> {
    cfg.fail(IoOp::Sync, dir)
        .map_err(|e| LogError::io("fsync directory", dir, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io("fsync directory", dir, e))
}

/// syncfs: writes back every dirty file and directory of the filesystem that
/// holds `path`, and waits for it (one call instead of an fdatasync per file,
/// for a log opening many partitions). Linux reports writeback errors here
/// since 5.8.
pub(crate) fn sync_fs(cfg: &LogConfig, path: &Path) -> Result<()> {
    cfg.fail(IoOp::Sync, path)
        .map_err(|e| LogError::io("syncfs", path, e))?;
    let dir = File::open(path).map_err(|e| LogError::io("open for syncfs", path, e))?;
    // SAFETY: syncfs only reads the descriptor, which `dir` keeps open.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(LogError::io(
            "syncfs",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests;
