use super::*;
use std::io::Read;
use std::os::fd::AsRawFd;

fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

#[test]
fn revoking_a_key_cuts_its_connections_only() {
    let (mut c1, s1) = pair();
    let (c2, s2) = pair();
    let mut conns = Conns::default();
    conns.seen(s1.as_raw_fd(), &[1; 32]).unwrap().store = true;
    conns.seen(s2.as_raw_fd(), &[2; 32]).unwrap().store = true;
    assert_eq!(conns.store_keys(), 2);
    let cut = conns.cut(|k| *k != [1; 32]);
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0].peer(), c1.local_addr().unwrap());
    let mut buf = [0u8; 1];
    assert_eq!(
        c1.read(&mut buf).unwrap(),
        0,
        "the revoked key's end sees EOF"
    );
    assert_eq!(conns.len(), 1);
    assert_eq!(conns.store_keys(), 1);
    c2.set_nonblocking(true).unwrap();
    let mut c2 = c2;
    assert!(
        c2.read(&mut buf).is_err(),
        "the other connection is open (no EOF)"
    );
    drop(s2);
}

#[test]
fn closed_and_reused_descriptors_are_forgotten() {
    let (_c1, s1) = pair();
    let fd = s1.as_raw_fd();
    let mut conns = Conns::default();
    conns.seen(fd, &[1; 32]).unwrap().store = true;
    conns.seen(fd, &[1; 32]).unwrap();
    assert_eq!(conns.len(), 1);
    drop(s1);
    // Another connection may take the number: it is not the one known.
    conns.closed(fd);
    assert!(conns.is_empty(), "closed: forgotten");
    // Another connection may take the number: seen, it is a new one.
    conns.seen(fd, &[1; 32]);
    let (_c2, s2) = pair();
    if let Some(c) = conns.seen(s2.as_raw_fd(), &[1; 32]) {
        assert!(!c.store, "not the closed connection's state");
    }
    conns.closed(s2.as_raw_fd());
    assert_eq!(conns.len(), 1, "not closed yet: kept until it is");
    drop(s2);
    conns.settle();
    assert!(conns.is_empty());
    assert_eq!(conns.store_keys(), 0);
    // A key seen by a descriptor that is no TCP connection: not known.
    assert!(conns.seen(-1, &[3; 32]).is_none());
}

#[test]
fn one_key_on_many_connections_is_one_store() {
    let (_a, s1) = pair();
    let (_b, s2) = pair();
    let (_c, s3) = pair();
    let mut conns = Conns::default();
    for s in [&s1, &s2] {
        conns.seen(s.as_raw_fd(), &[7; 32]).unwrap().store = true;
    }
    conns.seen(s3.as_raw_fd(), &[8; 32]).unwrap();
    assert_eq!(conns.store_keys(), 1, "one key, however many connections");
    conns.seen(s3.as_raw_fd(), &[8; 32]).unwrap().store = true;
    assert_eq!(conns.store_keys(), 2);
}
