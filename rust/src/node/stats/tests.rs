use super::*;

#[test]
fn sync_times_bucket_by_duration_and_keep_the_maximum() {
    let t = SyncTimes::default();
    for us in [100, 499, 500, 1_500, 7_000, 250_000] {
        t.record(Duration::from_micros(us));
    }
    let s = t.snapshot();
    assert_eq!(s.count, 6);
    assert_eq!(s.micros, 100 + 499 + 500 + 1_500 + 7_000 + 250_000);
    assert_eq!(s.max_micros, 250_000);
    // [0,0.5) [0.5,1) [1,2) [2,5) [5,10) [10,50) [50,200) [200,-)
    assert_eq!(s.buckets, [2, 1, 1, 0, 1, 0, 0, 1]);
}
