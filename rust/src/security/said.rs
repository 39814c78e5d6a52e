//! Refusals logged once per peer and reason a minute: a refused peer that
//! retries every 100 ms must not fill the log, and each one is still seen.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often one peer's refusal for one reason is logged again.
pub const SAY_EVERY: Duration = Duration::from_secs(60);

/// When each peer-and-reason was last logged (at most 10,000 remembered).
#[derive(Debug, Default)]
pub struct Said(HashMap<String, Instant>);

impl Said {
    /// Whether a refusal of `who` for `why` is to be logged now.
    pub fn due(&mut self, who: &str, why: &str) -> bool {
        let now = Instant::now();
        let k = format!("{who} {why}");
        if self
            .0
            .get(&k)
            .is_some_and(|t| now.duration_since(*t) < SAY_EVERY)
        {
            return false;
        }
        if self.0.len() > 10_000 {
            self.0.clear();
        }
        self.0.insert(k, now);
        true
    }

    /// Logs `what` (a refusal of `who`), at most once per [`SAY_EVERY`].
    pub fn say(&mut self, who: &str, what: &str) {
        if self.due(who, what) {
            tracing::warn!("{what} (peer {who})");
        }
    }
}

#[cfg(test)]
mod tests;
