//! Criterion benchmarks of the wire codec: encode and decode of RECORD with
//! 100 B and 1 KiB content, both dialects. Results: benches/RESULTS.md.

use std::hint::black_box;

use _native::wire::{decode, Dialect, FrameBuf, Message, Record};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const ADDR: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire");
    g.throughput(Throughput::Elements(1));
    for size in [100usize, 1024] {
        let content = vec![0x5Au8; size];
        let msg = Message::Record(Record {
            topic: b"weather",
            address: ADDR,
            subject: b"weather",
            sequence: 123_456,
            content: &content,
        });
        for dialect in [Dialect::Rfc, Dialect::Zproto] {
            let name = dialect.name();
            let mut buf = FrameBuf::new();
            g.bench_function(format!("encode_record_{size}B_{name}"), |b| {
                b.iter(|| {
                    black_box(&msg).encode_into(dialect, &mut buf).unwrap();
                    black_box(&buf);
                })
            });
            let frames = msg.to_frames(dialect).unwrap();
            g.bench_function(format!("decode_record_{size}B_{name}"), |b| {
                b.iter(|| black_box(decode(black_box(&frames)).unwrap()))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
