//! The config file of `dafka-store` and `dafka-tower`: [`FileConfig`] and
//! its sections, with the C reference's key names as aliases.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::node::config::TowerAddr;

/// A config file for either binary. Every key is optional; unknown keys are
/// errors, so a typo does not go unnoticed. Durations are integers in ms, as in
/// the C reference.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// A `tracing` filter, e.g. `"info"` or `"dafka=debug"`.
    pub log_level: Option<String>,
    #[serde(default)]
    pub node: NodeSection,
    #[serde(default)]
    pub beacon: BeaconSection,
    #[serde(default)]
    pub store: StoreSection,
    #[serde(default)]
    pub tower: TowerSection,
    #[serde(default)]
    pub security: SecuritySection,
    #[serde(default)]
    pub metrics: MetricsSection,
}

/// `[metrics]`: Prometheus metrics over HTTP (docs/metrics.md).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// `HOST:PORT` to serve `/metrics` on (port 0: any free one).
    pub listen: Option<String>,
}

/// `[node]`: how the store's node binds and finds its peers.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    pub bind: Option<String>,
    pub towers: Option<Vec<String>>,
    pub peers: Option<Vec<String>>,
    pub wire: Option<String>,
    pub advertise_host: Option<String>,
    pub sndhwm: Option<i32>,
    pub rcvhwm: Option<i32>,
}

/// `[beacon]`: the C reference's `beacon/*` keys.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeaconSection {
    /// `beacon/interval`, ms.
    pub interval: Option<u64>,
    /// `beacon/timeout`, ms.
    pub timeout: Option<u64>,
    /// `beacon/sub_address`: the tower's XSUB a node connects to.
    pub sub_address: Option<String>,
    /// `beacon/pub_address`: the tower's XPUB a node connects to.
    pub pub_address: Option<String>,
    /// `beacon/verbose`: non-zero logs at `debug`.
    pub verbose: Option<u8>,
}

/// `[store]`: the store's directory (`store/db`) and its log's settings.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `store/db`: the store's directory.
    #[serde(alias = "dir")]
    pub db: Option<PathBuf>,
    pub fsync: Option<String>,
    pub flush_interval_ms: Option<u64>,
    pub flush_messages: Option<u64>,
    pub segment_bytes: Option<u64>,
    /// 0 keeps records forever.
    pub retain_hours: Option<u64>,
    /// 0 sets no size limit.
    pub retain_bytes: Option<u64>,
    /// 0 keeps parked partitions for good.
    pub forget_parked_hours: Option<u64>,
    /// 0: half the open-files limit.
    pub max_open_files: Option<usize>,
    pub recovery: Option<String>,
    pub max_record_bytes: Option<usize>,
    pub fetch_retry_ms: Option<u64>,
    /// `store/verbose`: non-zero logs at `debug`.
    pub verbose: Option<u8>,
}

/// `[tower]`: the C reference's `tower/*` keys.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TowerSection {
    /// `tower/sub_address`: the XSUB node beacons come in on.
    #[serde(alias = "sub_address")]
    pub beacon_in: Option<String>,
    /// `tower/pub_address`: the XPUB towards nodes.
    #[serde(alias = "pub_address")]
    pub beacon_out: Option<String>,
    /// `tower/verbose`: non-zero logs at `debug`.
    pub verbose: Option<u8>,
}

/// `[security]`: secure mode (CURVE + ZAP, docs/security.md). Both keys or
/// neither; relative paths are resolved against the config file's directory
/// ([`FileConfig::load`]).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecuritySection {
    /// The node's secret certificate, `NAME.key_secret` (`dafka keygen`).
    pub cert: Option<PathBuf>,
    /// The directory of trusted public certificates.
    pub trust: Option<PathBuf>,
}

impl FileConfig {
    /// Parses TOML text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))
    }

    /// Reads and parses a config file. The `[security]` paths, when
    /// relative, are taken from the file's directory (the file names keys
    /// next to it whatever directory the binary is started from).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read config {}: {e}", path.display())))?;
        let mut cfg = Self::parse(&text, &path.display().to_string())?;
        cfg.security.resolve(path.parent().unwrap_or(Path::new("")));
        Ok(cfg)
    }

    /// The file's towers: `[node] towers`, plus the one `[beacon]
    /// sub_address`/`pub_address` name (the C reference's way).
    pub(super) fn towers(&self) -> Result<Option<Vec<String>>> {
        let mut towers = self.node.towers.clone();
        let b = &self.beacon;
        let beacon = match (&b.sub_address, &b.pub_address) {
            (None, None) => None,
            (Some(s), None) => Some(s.clone()),
            (None, Some(_)) => {
                return Err(Error::Config(
                    "[beacon] pub_address needs sub_address too".into(),
                ))
            }
            (Some(s), Some(p)) => {
                // Each names one port (no OUT = IN + 1 is implied, so 65535
                // is as good as any); the whole is checked as a tower below.
                fn one(a: &str) -> Result<(&str, u16)> {
                    crate::node::config::split_tcp(a)
                        .filter(|(h, port)| !h.is_empty() && *port != 0)
                        .ok_or_else(|| {
                            Error::Config(format!(
                                "[beacon] address {a:?}: use \"tcp://HOST:PORT\""
                            ))
                        })
                }
                let (sh, sport) = one(s)?;
                let (ph, pport) = one(p)?;
                if sh != ph {
                    return Err(Error::Config(format!(
                        "[beacon] sub_address {s:?} and pub_address {p:?} must name the same host"
                    )));
                }
                Some(format!("tcp://{sh}:{sport},{pport}"))
            }
        };
        if let Some(t) = beacon {
            TowerAddr::parse(&t)?;
            towers.get_or_insert_with(Vec::new).push(t);
        }
        Ok(towers)
    }
}

impl SecuritySection {
    /// Makes relative paths relative to `base` (the config file's directory).
    pub fn resolve(&mut self, base: &Path) {
        for p in [&mut self.cert, &mut self.trust].into_iter().flatten() {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
}
