//! A trust directory: the public certificates of every key a cluster lets in
//! (czmq's `zcertstore` of a directory). It is read again when it changes (a
//! file added, removed or rewritten), so adding or revoking a key needs no
//! restart: [`TrustStore::refresh`] notices within its interval.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use super::acl::{Role, TopicPatterns, KEY_PREFIX};
use super::cert::Certificate;
use super::error::SecurityError;

/// What the trust directory says of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    /// The certificate file it came from.
    pub file: PathBuf,
    /// None when the certificate names no role: it may connect, and do
    /// nothing a role is needed for.
    pub role: Option<Role>,
    pub topics: TopicPatterns,
}

/// The trusted keys at one moment.
#[derive(Debug, Default)]
pub struct TrustSnapshot {
    keys: HashMap<[u8; 32], Trusted>,
    /// Keys by their first [`KEY_PREFIX`] bytes, for addresses.
    by_prefix: HashMap<[u8; KEY_PREFIX], Vec<[u8; 32]>>,
    /// Files that are not certificates (with why): skipped, and reported.
    pub skipped: Vec<(PathBuf, String)>,
}

impl TrustSnapshot {
    pub fn get(&self, key: &[u8; 32]) -> Option<&Trusted> {
        self.keys.get(key)
    }

    pub fn contains(&self, key: &[u8; 32]) -> bool {
        self.keys.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The trusted key whose first [`KEY_PREFIX`] bytes an address starts
    /// with ([`super::acl::address_for_key`]), if exactly one is.
    pub fn key_of_address(&self, address: &[u8]) -> Option<(&[u8; 32], &Trusted)> {
        let hex = address.get(..2 * KEY_PREFIX)?;
        let mut prefix = [0u8; KEY_PREFIX];
        for (b, pair) in prefix.iter_mut().zip(hex.chunks(2)) {
            let s = std::str::from_utf8(pair).ok()?;
            if s.bytes().any(|c| c.is_ascii_lowercase()) {
                return None;
            }
            *b = u8::from_str_radix(s, 16).ok()?;
        }
        match self.by_prefix.get(&prefix)?.as_slice() {
            [key] if super::acl::address_matches_key(address, key) => self.keys.get_key_value(key),
            _ => None,
        }
    }

    /// Reads every certificate in `dir` (not descending; hidden files and
    /// `*.key_secret` files skipped: a trust directory holds public
    /// certificates).
    pub fn load(dir: &Path) -> Result<Self, SecurityError> {
        let mut snap = TrustSnapshot::default();
        for (path, _) in listing(dir)? {
            match Certificate::load(&path).and_then(|c| {
                Ok(Trusted {
                    file: path.clone(),
                    role: c.role()?,
                    topics: c.topics()?,
                })
                .map(|t| (c.public, t))
            }) {
                Ok((key, t)) => {
                    if snap.keys.insert(key, t).is_none() {
                        let mut prefix = [0u8; KEY_PREFIX];
                        prefix.copy_from_slice(&key[..KEY_PREFIX]);
                        snap.by_prefix.entry(prefix).or_default().push(key);
                    }
                }
                Err(e) => snap.skipped.push((path, e.to_string())),
            }
        }
        Ok(snap)
    }
}

/// The certificate files of a directory, each with what tells a change
/// (mtime, size).
type Listing = Vec<(PathBuf, (SystemTime, u64))>;

/// The certificate files of `dir`.
fn listing(dir: &Path) -> Result<Listing, SecurityError> {
    let io = |op, source| SecurityError::Io {
        op,
        path: dir.to_path_buf(),
        source,
    };
    let mut v = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| io("read trust directory", e))? {
        let e = e.map_err(|e| io("read trust directory", e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name.ends_with(".key_secret") {
            continue;
        }
        let Ok(md) = e.metadata() else { continue };
        if !md.is_file() {
            continue;
        }
        v.push((
            e.path(),
            (md.modified().unwrap_or(SystemTime::UNIX_EPOCH), md.len()),
        ));
    }
    v.sort();
    Ok(v)
}

/// A trust directory, shared by a node's threads (its loop and its ZAP
/// handler), read again at most once per `interval` when it changed.
#[derive(Debug)]
pub struct TrustStore {
    dir: PathBuf,
    interval: Duration,
    inner: RwLock<Inner>,
}

#[derive(Debug)]
struct Inner {
    snapshot: Arc<TrustSnapshot>,
    listing: Listing,
    checked: Instant,
    /// Bumped at every change: who cached a decision knows to look again.
    generation: u64,
}

impl TrustStore {
    /// Reads `dir` now; an unreadable directory is an error, an empty one is
    /// not (nothing is let in).
    pub fn open(dir: &Path, interval: Duration) -> Result<Self, SecurityError> {
        let listing = listing(dir)?;
        let snapshot = Arc::new(TrustSnapshot::load(dir)?);
        for (p, why) in &snapshot.skipped {
            tracing::warn!("trust directory: skipping {}: {why}", p.display());
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            interval,
            inner: RwLock::new(Inner {
                snapshot,
                listing,
                checked: Instant::now(),
                generation: 0,
            }),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The keys trusted now.
    pub fn snapshot(&self) -> Arc<TrustSnapshot> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .snapshot
            .clone()
    }

    pub fn generation(&self) -> u64 {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .generation
    }

    /// Reads the directory again if `interval` passed and it changed;
    /// returns whether the trusted keys changed. A directory that cannot be
    /// read keeps the keys as they were (and says so).
    pub fn refresh(&self, now: Instant) -> bool {
        {
            let g = self.inner.read().unwrap_or_else(|p| p.into_inner());
            if now.saturating_duration_since(g.checked) < self.interval {
                return false;
            }
        }
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.checked = now;
        let listing = match listing(&self.dir) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("trust directory: {e}; keeping the keys read before");
                return false;
            }
        };
        if listing == g.listing {
            return false;
        }
        let snap = match TrustSnapshot::load(&self.dir) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("trust directory: {e}; keeping the keys read before");
                return false;
            }
        };
        for (p, why) in &snap.skipped {
            tracing::warn!("trust directory: skipping {}: {why}", p.display());
        }
        g.listing = listing;
        let changed = snap.keys != g.snapshot.keys;
        if changed {
            tracing::info!(
                "trust directory {} reread: {} keys trusted",
                self.dir.display(),
                snap.len()
            );
            g.generation += 1;
        }
        g.snapshot = Arc::new(snap);
        changed
    }

    /// Forces the next [`TrustStore::refresh`] to look (tests, SIGHUP).
    pub fn expire(&self) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.checked = Instant::now() - self.interval;
    }
}

#[cfg(test)]
mod tests;
