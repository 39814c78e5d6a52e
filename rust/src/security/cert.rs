//! CURVE certificates in czmq's format (`zcert`): ZPL text (RFC 4), a
//! `metadata` section of `name = "value"` pairs and a `curve` section with
//! `public-key` and, in the secret file, `secret-key`, each a Z85 string of
//! 40 characters. pyzmq's `zmq.auth.load_certificate` reads them, and
//! `zmq.auth.create_certificates` writes files this module reads.
//!
//! dafka's metadata: `role` (store, producer, consumer or tower) and `topics`
//! (comma-separated patterns, `*` for any run of characters; absent means
//! every topic).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::acl::{Role, TopicPatterns};
use super::error::SecurityError;

/// A certificate: a public key, maybe its secret key, and metadata.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificate {
    pub public: [u8; 32],
    pub secret: Option<[u8; 32]>,
    /// Metadata pairs in file order (`role`, `topics`, anything else).
    pub metadata: Vec<(String, String)>,
}

impl std::fmt::Debug for Certificate {
    // Never prints the secret key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("public", &self.public_z85())
            .field("secret", &self.secret.map(|_| "<secret>"))
            .field("metadata", &self.metadata)
            .finish()
    }
}

/// The Z85 alphabet (RFC 32).
const Z85: &[u8] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

fn z85_key(s: &str) -> Option<[u8; 32]> {
    // libzmq's decoder takes some characters outside the alphabet.
    if s.len() != 40 || !s.bytes().all(|b| Z85.contains(&b)) {
        return None;
    }
    zmq::z85_decode(s).ok()?.try_into().ok()
}

/// The Z85 text of a 32-byte key.
pub fn key_z85(key: &[u8; 32]) -> String {
    zmq::z85_encode(key).expect("32 bytes is a multiple of 4")
}

/// A Z85 key of 40 characters.
pub fn parse_key_z85(s: &str) -> Option<[u8; 32]> {
    z85_key(s)
}

impl Certificate {
    pub fn public_z85(&self) -> String {
        key_z85(&self.public)
    }

    /// A metadata value.
    pub fn meta(&self, name: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `role` in its metadata, if any (and valid).
    pub fn role(&self) -> Result<Option<Role>, SecurityError> {
        self.meta("role").map(str::parse).transpose()
    }

    /// The `topics` in its metadata; every topic when absent.
    pub fn topics(&self) -> Result<TopicPatterns, SecurityError> {
        match self.meta("topics") {
            Some(t) => t.parse(),
            None => Ok(TopicPatterns::all()),
        }
    }

    /// Reads a certificate file (public or secret).
    pub fn load(path: &Path) -> Result<Self, SecurityError> {
        let text = fs::read_to_string(path).map_err(|source| SecurityError::Io {
            op: "read",
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Reads a secret certificate file (`NAME.key_secret`), refusing one
    /// without its secret key.
    pub fn load_secret(path: &Path) -> Result<Self, SecurityError> {
        let c = Self::load(path)?;
        if c.secret.is_none() {
            return Err(SecurityError::NoSecret {
                path: path.to_path_buf(),
            });
        }
        Ok(c)
    }

    /// Parses ZPL certificate text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, SecurityError> {
        let bad = |line: usize, reason: &str| SecurityError::BadCertificate {
            path: path.to_path_buf(),
            line,
            reason: reason.to_string(),
        };
        let mut section = "";
        let (mut public, mut secret, mut metadata) = (None, None, Vec::new());
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim_end();
            if trimmed.trim_start().is_empty() || trimmed.trim_start().starts_with('#') {
                continue;
            }
            let indent = trimmed.len() - trimmed.trim_start().len();
            let body = trimmed.trim_start();
            if indent == 0 {
                section = match body {
                    "metadata" => "metadata",
                    "curve" => "curve",
                    // Other sections are ignored, as czmq does.
                    _ => "other",
                };
                continue;
            }
            let (name, value) = body
                .split_once('=')
                .ok_or_else(|| bad(line, "expected name = value"))?;
            let (name, value) = (name.trim(), value.trim());
            let value = match value.strip_prefix('"') {
                Some(v) => v
                    .strip_suffix('"')
                    .ok_or_else(|| bad(line, "unterminated quoted value"))?,
                None => value,
            };
            match section {
                "metadata" => metadata.push((name.to_string(), value.to_string())),
                "curve" if name == "public-key" => {
                    public = Some(z85_key(value).ok_or(SecurityError::BadKey {
                        path: path.to_path_buf(),
                        what: "public-key",
                    })?);
                }
                "curve" if name == "secret-key" => {
                    secret = Some(z85_key(value).ok_or(SecurityError::BadKey {
                        path: path.to_path_buf(),
                        what: "secret-key",
                    })?);
                }
                "" => return Err(bad(line, "a value outside any section")),
                _ => {}
            }
        }
        let public = public.ok_or_else(|| bad(0, "no curve public-key"))?;
        let cert = Certificate {
            public,
            secret,
            metadata,
        };
        // Metadata that dafka reads must be valid where it is read.
        cert.role()?;
        cert.topics()?;
        Ok(cert)
    }

    /// The file text, czmq style: with the secret key if `with_secret`.
    pub fn to_text(&self, with_secret: bool) -> String {
        let mut s = String::new();
        let when = humantime_now();
        s.push_str(&format!("#   ****  Generated on {when} by dafka  ****\n"));
        if with_secret && self.secret.is_some() {
            s.push_str("#   ZeroMQ CURVE **Secret** Certificate\n");
            s.push_str("#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n");
        } else {
            s.push_str("#   ZeroMQ CURVE Public Certificate\n");
            s.push_str("#   Exchange securely, or use a secure mechanism to verify the contents\n");
            s.push_str("#   of this file after exchange. Put it in a cluster's trust directory\n");
            s.push_str("#   to let its holder in.\n");
        }
        s.push('\n');
        s.push_str("metadata\n");
        for (k, v) in &self.metadata {
            s.push_str(&format!("    {k} = \"{v}\"\n"));
        }
        s.push_str("curve\n");
        s.push_str(&format!("    public-key = \"{}\"\n", self.public_z85()));
        if let (true, Some(sk)) = (with_secret, &self.secret) {
            s.push_str(&format!("    secret-key = \"{}\"\n", key_z85(sk)));
        }
        s
    }
}

/// UTC now as `YYYY-MM-DD HH:MM:SS` (the header line czmq writes).
fn humantime_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn check_name(name: &str) -> Result<(), SecurityError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(SecurityError::BadName {
            name: name.to_string(),
        })
    }
}

fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), SecurityError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |op, source| SecurityError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                SecurityError::Exists {
                    path: path.to_path_buf(),
                }
            } else {
                io("create", e)
            }
        })?;
    f.write_all(text.as_bytes()).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("sync", e))
}

/// Makes a new key pair and writes `DIR/NAME.key` (public, mode 0644) and
/// `DIR/NAME.key_secret` (both keys, mode 0600), with `role` and `topics`
/// (None = every topic) in their metadata. Never overwrites a file. Returns
/// the two paths.
pub fn keygen(
    dir: &Path,
    name: &str,
    role: Role,
    topics: Option<&TopicPatterns>,
) -> Result<(PathBuf, PathBuf), SecurityError> {
    check_name(name)?;
    let pair = zmq::CurveKeyPair::new().map_err(|e| SecurityError::NoCurve(e.to_string()))?;
    let mut metadata = vec![
        ("name".to_string(), name.to_string()),
        ("role".to_string(), role.name().to_string()),
    ];
    if let Some(t) = topics {
        metadata.push(("topics".to_string(), t.to_string()));
    }
    let cert = Certificate {
        public: pair.public_key,
        secret: Some(pair.secret_key),
        metadata,
    };
    fs::create_dir_all(dir).map_err(|source| SecurityError::Io {
        op: "create directory",
        path: dir.to_path_buf(),
        source,
    })?;
    let public = dir.join(format!("{name}.key"));
    let secret = dir.join(format!("{name}.key_secret"));
    if public.exists() {
        return Err(SecurityError::Exists { path: public });
    }
    write_new(&secret, &cert.to_text(true), 0o600)?;
    if let Err(e) = write_new(&public, &cert.to_text(false), 0o644) {
        let _ = fs::remove_file(&secret);
        return Err(e);
    }
    Ok((public, secret))
}

#[cfg(test)]
mod tests;
