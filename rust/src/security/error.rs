//! What can go wrong with keys, certificates and trust directories.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a certificate: {reason} (line {line})")]
    BadCertificate {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}: {what} is not a Z85 CURVE key of 40 characters")]
    BadKey { path: PathBuf, what: &'static str },
    #[error("{path} holds no secret key: pass NAME.key_secret, not NAME.key")]
    NoSecret { path: PathBuf },
    #[error("unknown role {found:?}: use store, producer, consumer or tower")]
    BadRole { found: String },
    #[error(
        "bad topic pattern {pattern:?}: patterns are topic names where * stands for any \
         run of characters, separated by commas"
    )]
    BadPattern { pattern: String },
    #[error("bad certificate name {name:?}: use letters, digits, '.', '-' and '_'")]
    BadName { name: String },
    #[error("{path} exists: keygen does not overwrite a certificate")]
    Exists { path: PathBuf },
    #[error(
        "{path} is a {found} certificate, and this node is a {want}: make one with \
         `dafka keygen DIR NAME --role {want}`"
    )]
    WrongRole {
        path: PathBuf,
        found: &'static str,
        want: &'static str,
    },
    #[error("this build's libzmq has no CURVE: {0}")]
    NoCurve(String),
}
