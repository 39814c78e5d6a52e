use super::*;

/// As pyzmq's `zmq.auth.create_certificates` writes them.
const PYZMQ_SECRET: &str = "#   ****  Generated on 2026-11-27 06:50:00.000000 by pyzmq  ****\n\
    #   ZeroMQ CURVE **Secret** Certificate\n\
    #   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\
    \n\
    metadata\n\
    curve\n    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n    secret-key = \"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6\"\n";

#[test]
fn reads_a_pyzmq_certificate() {
    let c = Certificate::parse(PYZMQ_SECRET, Path::new("x.key_secret")).unwrap();
    assert_eq!(c.public_z85(), "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
    assert_eq!(
        key_z85(&c.secret.unwrap()),
        "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
    );
    assert_eq!(c.role().unwrap(), None);
    assert!(c.topics().unwrap().is_all());
    assert!(
        !format!("{c:?}").contains("JTKVSB"),
        "Debug hides the secret"
    );
}

#[test]
fn round_trips_with_metadata_and_refuses_bad_text() {
    let c = Certificate {
        public: [7; 32],
        secret: Some([9; 32]),
        metadata: vec![
            ("role".into(), "consumer".into()),
            ("topics".into(), "weather.*,logs".into()),
        ],
    };
    let p = Path::new("c");
    let back = Certificate::parse(&c.to_text(true), p).unwrap();
    assert_eq!(back, c);
    let public = Certificate::parse(&c.to_text(false), p).unwrap();
    assert_eq!(public.secret, None);
    assert_eq!(public.role().unwrap(), Some(Role::Consumer));
    assert!(public.topics().unwrap().allows(b"weather.x"));
    assert!(!public.topics().unwrap().allows(b"sales"));
    for (text, want) in [
        ("metadata\n", "no curve public-key"),
        ("curve\n    public-key = \"short\"\n", "40 characters"),
        ("curve\n    public-key\n", "name = value"),
        ("    role = \"x\"\n", "outside any section"),
        (
            "metadata\n    role = \"admin\"\ncurve\n    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n",
            "unknown role",
        ),
        ("curve\n    public-key = \"abc\n", "unterminated"),
    ] {
        let e = Certificate::parse(text, p).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn a_public_file_is_no_secret_certificate() {
    let d = tempfile::tempdir().unwrap();
    let c = Certificate {
        public: [1; 32],
        secret: None,
        metadata: vec![],
    };
    let path = d.path().join("a.key");
    fs::write(&path, c.to_text(false)).unwrap();
    let e = Certificate::load_secret(&path).unwrap_err().to_string();
    assert!(e.contains("NAME.key_secret"), "{e}");
}

#[test]
fn keygen_writes_a_pair_and_never_overwrites() {
    if !crate::security::has_curve() {
        // Only a libzmq without CURVE: keygen says so.
        let d = tempfile::tempdir().unwrap();
        let e = keygen(d.path(), "s1", Role::Store, None).unwrap_err();
        assert!(matches!(e, SecurityError::NoCurve(_)), "{e}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let t: TopicPatterns = "a.*".parse().unwrap();
    let (public, secret) = keygen(d.path(), "s1", Role::Producer, Some(&t)).unwrap();
    let p = Certificate::load(&public).unwrap();
    let s = Certificate::load_secret(&secret).unwrap();
    assert_eq!(p.public, s.public);
    assert_eq!(p.secret, None);
    assert_eq!(s.role().unwrap(), Some(Role::Producer));
    assert_eq!(p.topics().unwrap(), t);
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let e = keygen(d.path(), "s1", Role::Store, None).unwrap_err();
    assert!(matches!(e, SecurityError::Exists { .. }), "{e}");
    assert_eq!(Certificate::load(&public).unwrap(), p, "left as it was");
    for bad in ["", "../x", "a/b", ".hidden", "sp ace"] {
        assert!(keygen(d.path(), bad, Role::Store, None).is_err(), "{bad:?}");
    }
}
