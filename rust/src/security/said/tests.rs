use super::*;

#[test]
fn once_per_peer_and_reason() {
    let mut s = Said::default();
    assert!(s.due("a", "x"));
    assert!(!s.due("a", "x"));
    assert!(s.due("a", "y"));
    assert!(s.due("b", "x"));
}
