//! Roles and topic patterns, as a certificate's metadata states them, and the
//! binding of a node's address to its key.

use std::fmt;
use std::str::FromStr;

use super::error::SecurityError;

/// What a node may do in a secure cluster; a certificate's `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Appends records, ACKs them, serves FETCHes and replicates.
    Store,
    /// Publishes records of its own partition; its ACKs come from stores only.
    Producer,
    /// Reads: subscribes, FETCHes, asks for heads. Never ACKs or injects records.
    Consumer,
    /// Relays beacons.
    Tower,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Store, Role::Producer, Role::Consumer, Role::Tower];

    pub fn name(self) -> &'static str {
        match self {
            Role::Store => "store",
            Role::Producer => "producer",
            Role::Consumer => "consumer",
            Role::Tower => "tower",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = SecurityError;
    fn from_str(s: &str) -> Result<Self, SecurityError> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| SecurityError::BadRole {
                found: s.to_string(),
            })
    }
}

/// The topics a certificate's holder may read and write: comma-separated
/// patterns where `*` stands for any run of characters (`weather.*`,
/// `logs`, `*`). No `topics` in a certificate means every topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPatterns(Vec<String>);

impl TopicPatterns {
    /// Every topic.
    pub fn all() -> Self {
        TopicPatterns(vec!["*".to_string()])
    }

    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// Whether `topic` matches one of the patterns.
    pub fn allows(&self, topic: &[u8]) -> bool {
        self.0.iter().any(|p| glob(p.as_bytes(), topic))
    }

    /// Whether every topic matches (a store's or tower's usual patterns).
    pub fn is_all(&self) -> bool {
        self.0.iter().any(|p| p.bytes().all(|b| b == b'*'))
    }
}

impl FromStr for TopicPatterns {
    type Err = SecurityError;
    fn from_str(s: &str) -> Result<Self, SecurityError> {
        let mut v = Vec::new();
        for p in s.split(',').map(str::trim) {
            let bad = p.is_empty()
                || p.len() > 255
                || p.chars().any(|c| c.is_control() || c == '"' || c == ',');
            if bad {
                return Err(SecurityError::BadPattern {
                    pattern: p.to_string(),
                });
            }
            v.push(p.to_string());
        }
        Ok(TopicPatterns(v))
    }
}

impl fmt::Display for TopicPatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

/// `*` matches any run of bytes (also none); everything else itself.
fn glob(pattern: &[u8], s: &[u8]) -> bool {
    // Iterative, with one backtrack point: linear in practice, no recursion.
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, i));
            p += 1;
        } else if p < pattern.len() && pattern[p] == s[i] {
            p += 1;
            i += 1;
        } else if let Some((sp, si)) = star {
            p = sp + 1;
            i = si + 1;
            star = Some((sp, si + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// How many bytes of a node's public key its address starts with (in hex).
pub const KEY_PREFIX: usize = 8;

/// A secure node's address: the first [`KEY_PREFIX`] bytes of its public key
/// and 8 random bytes, as 32 upper-case hex characters (the form every Dafka
/// address has). Every peer can check an address against the key that
/// authenticated its sender ([`address_matches_key`]); nodes sharing a
/// certificate (a Spark job's tasks) still get addresses of their own.
pub fn address_for_key(public: &[u8; 32]) -> String {
    let random = uuid::Uuid::new_v4();
    let mut raw = [0u8; 16];
    raw[..KEY_PREFIX].copy_from_slice(&public[..KEY_PREFIX]);
    raw[KEY_PREFIX..].copy_from_slice(&random.as_bytes()[..16 - KEY_PREFIX]);
    raw.iter().map(|b| format!("{b:02X}")).collect()
}

/// Whether `address` (32 hex characters) belongs to the holder of `public`.
pub fn address_matches_key(address: &[u8], public: &[u8; 32]) -> bool {
    if address.len() != 32 {
        return false;
    }
    public[..KEY_PREFIX]
        .iter()
        .zip(address.chunks(2))
        .all(|(b, hex)| hex == format!("{b:02X}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_and_print() {
        for r in Role::ALL {
            assert_eq!(r.name().parse::<Role>().unwrap(), r);
        }
        let e = "admin".parse::<Role>().unwrap_err().to_string();
        assert!(e.contains("store, producer, consumer or tower"), "{e}");
    }

    #[test]
    fn topic_patterns_match_as_globs() {
        let p: TopicPatterns = "weather.*, logs,*-eu".parse().unwrap();
        assert!(p.allows(b"weather.paris"));
        assert!(p.allows(b"weather."));
        assert!(!p.allows(b"weather"));
        assert!(p.allows(b"logs"));
        assert!(!p.allows(b"logs2"));
        assert!(p.allows(b"sales-eu"));
        assert!(!p.allows(b"sales-us"));
        assert!(!p.is_all());
        assert!(TopicPatterns::all().allows(b""));
        assert!(TopicPatterns::all().is_all());
        let mid: TopicPatterns = "a*b*c".parse().unwrap();
        assert!(mid.allows(b"abc") && mid.allows(b"aXXbYYc") && !mid.allows(b"aXXbYY"));
        assert_eq!(p.to_string(), "weather.*,logs,*-eu");
        for bad in ["", "a,,b", "a\"b", "x\ny"] {
            assert!(bad.parse::<TopicPatterns>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pathological_pattern_stays_linear() {
        let p: TopicPatterns = "*a*a*a*a*a*a*a*a*b".parse().unwrap();
        assert!(!p.allows(&[b'a'; 200]));
    }

    #[test]
    fn addresses_bind_to_their_key() {
        let key = [0xABu8; 32];
        let mut other = key;
        other[3] = 0;
        let a = address_for_key(&key);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with("ABABABABABABABAB"));
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase()));
        assert_ne!(
            a,
            address_for_key(&key),
            "two nodes, one key: two addresses"
        );
        assert!(address_matches_key(a.as_bytes(), &key));
        assert!(!address_matches_key(a.as_bytes(), &other));
        assert!(!address_matches_key(&a.as_bytes()[..31], &key));
        assert!(!address_matches_key(a.to_lowercase().as_bytes(), &key));
    }
}
