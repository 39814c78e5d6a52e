//! Unit tests of `io.rs`.

use super::*;

#[test]
fn a_vectored_write_of_many_parts_lands_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let file = File::create(&path).unwrap();
    let a: Vec<u8> = (0..200_077u32).map(|i| i as u8).collect();
    let b = vec![9u8; 65_535];
    write_vectored_at(&LogConfig::default(), &file, &path, &[&a, &b, &[], &a], 3).unwrap();
    let got = fs::read(&path).unwrap();
    assert_eq!(&got[3..], [&a[..], &b, &a].concat());
}
