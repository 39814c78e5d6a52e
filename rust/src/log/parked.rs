//! Parked partitions: those with no record left, kept as their next offset in
//! one registry file instead of a directory with an empty segment each.
//!
//! Every Spark task and every producer run is a new partition, and retention
//! empties each once its producer is gone. The partition must keep its next
//! offset (a store that forgot it would FETCH it back from a peer that still
//! holds it, or start it again at 0), but it needs nothing else: no segment,
//! no index, no directory, no descriptor, no [`super::partition::Partition`].
//! A store that has seen a million partitions would otherwise hold three
//! million files and directories, and open them all at start.
//!
//! `ROOT/.parked` is append-only, one line per parking:
//!
//! ```text
//! <escaped topic> <partition> <next offset> <crc32c of what precedes, 8 hex digits>\n
//! ```
//!
//! A partition directory that exists wins over its lines (the partition was
//! appended to again after it was parked); of several lines, the highest next
//! offset wins. A line that does not parse or check (a torn append) is left
//! out. The file is rewritten without stale lines at open, and when stale
//! lines outnumber the parked partitions.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::config::{IoOp, LogConfig};
use super::error::{LogError, Result};
use super::format::{check_partition_name, escape_name, unescape_name};
use super::io;

/// Name of the registry in the log's root (not a valid escaped topic name).
pub const PARKED_FILE: &str = ".parked";

/// (topic, partition name) → next offset.
pub(crate) type Parked = BTreeMap<(Vec<u8>, String), u64>;

/// What [`load`] found in the registry.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub parked: Parked,
    /// Lines in the file, good or not.
    pub lines: usize,
    /// Lines that did not parse or check, or a last line without its newline.
    pub bad: usize,
}

pub(crate) fn path(root: &Path) -> PathBuf {
    root.join(PARKED_FILE)
}

fn line_crc(body: &str) -> u32 {
    crc32c::crc32c(body.as_bytes())
}

/// One registry line, newline included.
pub(crate) fn encode(topic: &[u8], partition: &str, next: u64) -> Result<String> {
    let t = escape_name(topic).map_err(LogError::Invalid)?;
    let body = format!("{t} {partition} {next}");
    Ok(format!("{body} {:08x}\n", line_crc(&body)))
}

/// The entry of one line (without its newline), if it is whole and checks.
pub(crate) fn decode(line: &str) -> Option<(Vec<u8>, String, u64)> {
    let (body, crc) = line.rsplit_once(' ')?;
    if crc.len() != 8 || u32::from_str_radix(crc, 16).ok()? != line_crc(body) {
        return None;
    }
    let mut it = body.split(' ');
    let (t, p, n) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || check_partition_name(p).is_err() {
        return None;
    }
    Some((unescape_name(t)?, p.to_owned(), n.parse().ok()?))
}

/// Reads the registry of the log at `root` (empty when there is none).
pub(crate) fn load(root: &Path) -> Result<Loaded> {
    let path = path(root);
    let text = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(LogError::io("read", &path, e)),
    };
    let mut out = Loaded::default();
    let whole = text.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let n = lines.len();
    for (i, raw) in lines.into_iter().enumerate() {
        out.lines += 1;
        let entry = std::str::from_utf8(raw).ok().and_then(decode);
        match entry {
            Some((t, p, next)) if whole || i + 1 < n => {
                let e = out.parked.entry((t, p)).or_insert(next);
                *e = (*e).max(next);
            }
            _ => out.bad += 1,
        }
    }
    if out.bad > 0 {
        tracing::warn!(
            "{}: {} line(s) torn or damaged were left out",
            path.display(),
            out.bad
        );
    }
    Ok(out)
}

/// Appends `lines` (from [`encode`]) to the registry and fdatasyncs it (and
/// the root, when it created the file).
pub(crate) fn append(cfg: &LogConfig, root: &Path, lines: &str) -> Result<()> {
    let path = path(root);
    let created = !path.exists();
    cfg.fail(IoOp::Write, &path)
        .map_err(|e| LogError::io("write", &path, e))?;
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| LogError::io("open", &path, e))?;
    f.write_all(lines.as_bytes())
        .map_err(|e| LogError::io("write", &path, e))?;
    io::sync_data(cfg, &f, &path)?;
    if created {
        io::sync_dir(cfg, root)?;
    }
    Ok(())
}

/// Replaces the registry by one line per entry of `parked` (none: no file),
/// atomically: a new file, synced, renamed over the old one.
pub(crate) fn rewrite(cfg: &LogConfig, root: &Path, parked: &Parked) -> Result<()> {
    let path = path(root);
    if parked.is_empty() {
        io::remove(cfg, &path)?;
        return io::sync_dir(cfg, root);
    }
    let mut text = String::new();
    for ((t, p), next) in parked {
        text.push_str(&encode(t, p, *next)?);
    }
    let tmp = root.join(format!("{PARKED_FILE}.new"));
    let f = io::create(cfg, &tmp)?;
    io::write_at(cfg, &f, &tmp, text.as_bytes(), 0)?;
    io::sync_data(cfg, &f, &tmp)?;
    fs::rename(&tmp, &path).map_err(|e| LogError::io("rename", &tmp, e))?;
    io::sync_dir(cfg, root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_round_trips_and_a_damaged_one_is_refused() {
        let line = encode(b"wea ther", "A1", 42).unwrap();
        assert!(line.starts_with("wea%20ther A1 42 ") && line.ends_with('\n'));
        let body = line.trim_end_matches('\n');
        assert_eq!(decode(body), Some((b"wea ther".to_vec(), "A1".into(), 42)));
        assert_eq!(decode(&body.replace("42", "43")), None, "CRC");
        assert_eq!(decode(&body[..body.len() - 1]), None, "torn");
        assert_eq!(decode(""), None);
        let bad_name = format!("t a/b 1 {:08x}", line_crc("t a/b 1"));
        assert_eq!(decode(&bad_name), None, "not a partition name");
    }

    #[test]
    fn load_keeps_the_highest_offset_and_leaves_out_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig::default();
        let mut text = encode(b"t", "A", 5).unwrap();
        text += &encode(b"t", "A", 9).unwrap();
        text += &encode(b"t", "A", 7).unwrap();
        text += &encode(b"u", "B", 3).unwrap();
        append(&cfg, dir.path(), &text).unwrap();
        let torn = encode(b"u", "C", 1).unwrap();
        append(&cfg, dir.path(), torn.trim_end_matches('\n')).unwrap();
        let got = load(dir.path()).unwrap();
        assert_eq!(got.lines, 5);
        assert_eq!(got.bad, 1, "the last line has no newline");
        let want: Parked = [
            ((b"t".to_vec(), "A".into()), 9),
            ((b"u".to_vec(), "B".into()), 3),
        ]
        .into_iter()
        .collect();
        assert_eq!(got.parked, want);
        rewrite(&cfg, dir.path(), &want).unwrap();
        let again = load(dir.path()).unwrap();
        assert_eq!((again.parked, again.lines, again.bad), (want, 2, 0));
        rewrite(&cfg, dir.path(), &Parked::new()).unwrap();
        assert!(!path(dir.path()).exists());
    }
}
