//! The ZAP handler (RFC 27/ZAP) of one node's ZeroMQ context: every CURVE
//! server socket of the context asks it about each client key at the
//! handshake, and it answers from the trust directory. Without a handler
//! bound on `inproc://zeromq.zap.01` a CURVE server lets any key in.
//!
//! It accepts a CURVE client whose key the trust directory holds (with the
//! key, in Z85, as the user id: messages from that client then carry it as
//! their `User-Id` property) and refuses everything else, counting and
//! logging each refusal (peer address, key, reason). ZAP acts only at the
//! handshake: revoking a key also needs the connections open with it
//! closed, which is the node's business (it watches
//! [`TrustStore::generation`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::cert::key_z85;
use super::trust::TrustStore;

/// Where libzmq looks for the handler, in each context.
pub const ZAP_ENDPOINT: &str = "inproc://zeromq.zap.01";

/// The ZAP domain dafka's server sockets use.
pub const DOMAIN: &str = "dafka";

/// Counters of a ZAP handler.
#[derive(Debug, Default)]
pub struct ZapStats {
    pub accepted: AtomicU64,
    /// Handshakes refused: unknown key, wrong mechanism, malformed request.
    pub refused: AtomicU64,
}

/// A running ZAP handler; stops (and unbinds) when dropped or closed.
pub struct ZapHandler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub stats: Arc<ZapStats>,
}

/// Why a ZAP request was refused, or the user id to accept it with.
fn decide(frames: &[Vec<u8>], trust: &TrustStore) -> Result<String, String> {
    let [version, _id, _domain, _address, _identity, mechanism, creds @ ..] = frames else {
        return Err(format!("malformed request of {} frames", frames.len()));
    };
    if version.as_slice() != b"1.0" {
        return Err("ZAP version is not 1.0".into());
    }
    if mechanism.as_slice() != b"CURVE" {
        return Err(format!(
            "mechanism {} (a secure cluster takes CURVE only)",
            String::from_utf8_lossy(mechanism)
        ));
    }
    let key: [u8; 32] = match creds {
        [k] => k
            .as_slice()
            .try_into()
            .map_err(|_| "a CURVE key is 32 bytes".to_string())?,
        _ => return Err("CURVE credentials are one key".into()),
    };
    if trust.snapshot().contains(&key) {
        Ok(key_z85(&key))
    } else {
        Err(format!(
            "key {} is not in the trust directory {}",
            key_z85(&key),
            trust.dir().display()
        ))
    }
}

impl ZapHandler {
    /// Binds the handler in `ctx` and serves it on a thread of its own,
    /// which also rereads `trust` when it changes (at its interval).
    pub fn start(ctx: &zmq::Context, trust: Arc<TrustStore>) -> Result<Self, zmq::Error> {
        let sock = ctx.socket(zmq::REP)?;
        sock.set_linger(0)?;
        sock.bind(ZAP_ENDPOINT)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ZapStats::default());
        let (st, sts) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("dafka-zap".into())
            .spawn(move || serve(&sock, &trust, &st, &sts))
            .map_err(|_| zmq::Error::EMFILE)?;
        Ok(Self {
            stop,
            thread: Some(thread),
            stats,
        })
    }

    /// Stops the thread and closes its socket (before the context ends).
    pub fn close(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ZapHandler {
    fn drop(&mut self) {
        self.close();
    }
}

fn serve(sock: &zmq::Socket, trust: &TrustStore, stop: &AtomicBool, stats: &ZapStats) {
    // A refusal is logged once per key and reason a minute, not per retry
    // (a refused client reconnects every 100 ms).
    let mut said = super::said::Said::default();
    while !stop.load(Relaxed) {
        trust.refresh(Instant::now());
        match sock.poll(zmq::POLLIN, 100) {
            Ok(0) | Err(zmq::Error::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        let frames = match sock.recv_multipart(0) {
            Ok(f) => f,
            Err(zmq::Error::EINTR) => continue,
            Err(_) => return,
        };
        let (status, text, user) = match decide(&frames, trust) {
            Ok(user) => {
                stats.accepted.fetch_add(1, Relaxed);
                ("200", "OK".to_string(), user)
            }
            Err(why) => {
                stats.refused.fetch_add(1, Relaxed);
                let peer = frames
                    .get(3)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .unwrap_or_default();
                if said.due(&peer, &why) {
                    tracing::warn!("refused a connection from {peer}: {why}");
                }
                ("400", why, String::new())
            }
        };
        let version = b"1.0".to_vec();
        let id = frames.get(1).cloned().unwrap_or_default();
        let reply = vec![
            version,
            id,
            status.as_bytes().to_vec(),
            text.into_bytes(),
            user.into_bytes(),
            Vec::new(),
        ];
        if sock.send_multipart(reply, 0).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
