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
mod tests {
    use super::*;
    use crate::security::cert::Certificate;
    use std::fs;
    use std::time::Duration;

    fn trust_with(keys: &[[u8; 32]]) -> (tempfile::TempDir, Arc<TrustStore>) {
        let d = tempfile::tempdir().unwrap();
        for (i, k) in keys.iter().enumerate() {
            let c = Certificate {
                public: *k,
                secret: None,
                metadata: vec![("role".into(), "consumer".into())],
            };
            fs::write(d.path().join(format!("k{i}.key")), c.to_text(false)).unwrap();
        }
        let t = TrustStore::open(d.path(), Duration::ZERO).unwrap();
        (d, Arc::new(t))
    }

    fn request(mechanism: &str, key: &[u8]) -> Vec<Vec<u8>> {
        vec![
            b"1.0".to_vec(),
            b"7".to_vec(),
            DOMAIN.as_bytes().to_vec(),
            b"127.0.0.1".to_vec(),
            Vec::new(),
            mechanism.as_bytes().to_vec(),
            key.to_vec(),
        ]
    }

    #[test]
    fn decides_by_the_trust_directory() {
        let (_d, t) = trust_with(&[[5; 32]]);
        assert_eq!(
            decide(&request("CURVE", &[5; 32]), &t),
            Ok(key_z85(&[5; 32]))
        );
        let e = decide(&request("CURVE", &[6; 32]), &t).unwrap_err();
        assert!(e.contains("not in the trust directory"), "{e}");
        assert!(decide(&request("PLAIN", &[5; 32]), &t).is_err());
        assert!(decide(&request("NULL", b""), &t).is_err());
        assert!(decide(&request("CURVE", &[5; 31]), &t).is_err());
        assert!(decide(&request("CURVE", &[5; 32])[..5], &t).is_err());
        let mut v = request("CURVE", &[5; 32]);
        v[0] = b"2.0".to_vec();
        assert!(decide(&v, &t).is_err());
    }

    /// The handler answers over the socket as RFC 27 says, from its thread.
    #[test]
    fn answers_requests_on_the_inproc_endpoint() {
        let (_d, t) = trust_with(&[[5; 32]]);
        let ctx = zmq::Context::new();
        let mut h = ZapHandler::start(&ctx, t).unwrap();
        let req = ctx.socket(zmq::REQ).unwrap();
        req.connect(ZAP_ENDPOINT).unwrap();
        for (key, status) in [([5u8; 32], "200"), ([6u8; 32], "400")] {
            req.send_multipart(request("CURVE", &key), 0).unwrap();
            let r = req.recv_multipart(0).unwrap();
            assert_eq!(r.len(), 6);
            assert_eq!(r[1], b"7");
            assert_eq!(r[2], status.as_bytes());
            if status == "200" {
                assert_eq!(r[4], key_z85(&key).into_bytes());
            }
        }
        assert_eq!(h.stats.accepted.load(Relaxed), 1);
        assert_eq!(h.stats.refused.load(Relaxed), 1);
        drop(req);
        h.close();
    }

    /// A CURVE server in the handler's context lets in only trusted keys,
    /// and what a trusted client receives carries its key as `User-Id`.
    #[test]
    fn a_curve_server_lets_in_only_trusted_keys() {
        if !crate::security::has_curve() {
            return;
        }
        let server = zmq::CurveKeyPair::new().unwrap();
        let good = zmq::CurveKeyPair::new().unwrap();
        let bad = zmq::CurveKeyPair::new().unwrap();
        let (_d, t) = trust_with(&[good.public_key]);
        let ctx = zmq::Context::new();
        let mut h = ZapHandler::start(&ctx, t).unwrap();
        let pull = ctx.socket(zmq::PULL).unwrap();
        pull.set_curve_server(true).unwrap();
        pull.set_curve_secretkey(&server.secret_key).unwrap();
        pull.set_zap_domain(DOMAIN).unwrap();
        pull.set_rcvtimeo(5000).unwrap();
        pull.bind("tcp://127.0.0.1:*").unwrap();
        let ep = pull.get_last_endpoint().unwrap().unwrap();
        let client = |kp: &zmq::CurveKeyPair| {
            let s = ctx.socket(zmq::PUSH).unwrap();
            s.set_curve_serverkey(&server.public_key).unwrap();
            s.set_curve_publickey(&kp.public_key).unwrap();
            s.set_curve_secretkey(&kp.secret_key).unwrap();
            s.set_linger(0).unwrap();
            s.connect(&ep).unwrap();
            s
        };
        let b = client(&bad);
        b.send("from a stranger", zmq::DONTWAIT).ok();
        let g = client(&good);
        g.send("from a friend", 0).unwrap();
        let mut m = zmq::Message::new();
        pull.recv(&mut m, 0).unwrap();
        assert_eq!(&m[..], b"from a friend");
        assert_eq!(m.gets("User-Id"), Some(key_z85(&good.public_key).as_str()));
        pull.set_rcvtimeo(300).unwrap();
        assert!(
            pull.recv(&mut m, 0).is_err(),
            "the stranger's message never arrives"
        );
        assert!(h.stats.refused.load(Relaxed) >= 1);
        drop((b, g, pull));
        h.close();
    }
}
