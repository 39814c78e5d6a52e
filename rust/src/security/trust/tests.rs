use super::*;

fn cert(dir: &Path, name: &str, key: u8, role: &str) -> [u8; 32] {
    let c = Certificate {
        public: [key; 32],
        secret: None,
        metadata: vec![("role".into(), role.into())],
    };
    fs::write(dir.join(format!("{name}.key")), c.to_text(false)).unwrap();
    c.public
}

#[test]
fn loads_public_certificates_and_skips_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let a = cert(d.path(), "a", 1, "store");
    let b = cert(d.path(), "b", 2, "consumer");
    fs::write(d.path().join("junk.txt"), "hello").unwrap();
    fs::write(d.path().join("x.key_secret"), "not looked at").unwrap();
    fs::write(d.path().join(".hidden"), "not looked at").unwrap();
    fs::create_dir(d.path().join("sub")).unwrap();
    let s = TrustStore::open(d.path(), Duration::ZERO).unwrap();
    let snap = s.snapshot();
    assert_eq!(snap.len(), 2);
    assert_eq!(snap.get(&a).unwrap().role, Some(Role::Store));
    assert_eq!(snap.get(&b).unwrap().role, Some(Role::Consumer));
    assert_eq!(snap.skipped.len(), 1, "{:?}", snap.skipped);
    assert!(snap.skipped[0].0.ends_with("junk.txt"));
    assert!(TrustStore::open(&d.path().join("none"), Duration::ZERO).is_err());
}

#[test]
fn a_change_is_seen_at_the_next_refresh_and_not_before_its_interval() {
    let d = tempfile::tempdir().unwrap();
    let a = cert(d.path(), "a", 1, "store");
    let s = TrustStore::open(d.path(), Duration::from_secs(3600)).unwrap();
    let b = cert(d.path(), "b", 2, "producer");
    assert!(!s.refresh(Instant::now()), "not before the interval");
    assert!(!s.snapshot().contains(&b));
    s.expire();
    assert!(s.refresh(Instant::now()));
    assert!(s.snapshot().contains(&b));
    assert_eq!(s.generation(), 1);
    // Revoked: the file removed.
    fs::remove_file(d.path().join("a.key")).unwrap();
    s.expire();
    assert!(s.refresh(Instant::now()));
    assert!(!s.snapshot().contains(&a));
    assert_eq!(s.generation(), 2);
    // Nothing changed: nothing to do.
    s.expire();
    assert!(!s.refresh(Instant::now()));
    // An unreadable directory keeps what was trusted.
    let moved = d.path().with_extension("moved");
    fs::rename(d.path(), &moved).unwrap();
    s.expire();
    assert!(!s.refresh(Instant::now()));
    assert!(s.snapshot().contains(&b));
    fs::rename(&moved, d.path()).unwrap();
}

#[test]
fn an_address_finds_its_key() {
    let d = tempfile::tempdir().unwrap();
    let a = cert(d.path(), "a", 0xA1, "store");
    cert(d.path(), "b", 0xB2, "consumer");
    let s = TrustStore::open(d.path(), Duration::ZERO).unwrap();
    let snap = s.snapshot();
    let addr = crate::security::address_for_key(&a);
    assert_eq!(snap.key_of_address(addr.as_bytes()).unwrap().0, &a);
    let stranger = crate::security::address_for_key(&[0xC3; 32]);
    assert!(snap.key_of_address(stranger.as_bytes()).is_none());
}
