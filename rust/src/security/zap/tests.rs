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
