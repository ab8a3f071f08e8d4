//! Records → Arrow: `BatchDecoder` on batches of 64 records of a mixed schema (an id, a label,
//! a 1.5 KiB image, 512 characters of text, a tensor of 64 bytes, a list of floats), beside
//! two ceilings measured in the same run:
//!
//! - `ceiling_copy`: copying the same records' bytes into one buffer (what any decoder must at
//!   least touch);
//! - `ceiling_arrow_take`: arrow-rs `take` of the same 64 rows from the batch they came from
//!   (the in-memory columnar read, what a reader of Arrow files does at best).
//!
//! `cargo bench -p guideloom-arrow --bench decode`.

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, ListBuilder, UInt8Builder};
use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, UInt32Array};
use criterion::{Criterion, criterion_main};
use guideloom_arrow::{BatchDecoder, RowEncoder};

const ROWS: usize = 10_000;
const BATCH: usize = 64;

fn table() -> RecordBatch {
    let mut tensor = FixedSizeListBuilder::new(UInt8Builder::new(), 64);
    let mut floats = ListBuilder::new(Float32Builder::new());
    for i in 0..ROWS {
        tensor
            .values()
            .append_slice(&[u8::try_from(i % 251).unwrap_or(0); 64]);
        tensor.append(true);
        floats.values().append_slice(&[i as f32, 0.5, 0.25]);
        floats.append(true);
    }
    let text: String = "lorem ipsum dolor sit amet ".repeat(19)[..512].to_owned();
    RecordBatch::try_from_iter([
        (
            "index",
            Arc::new(Int64Array::from_iter_values(0..ROWS as i64)) as ArrayRef,
        ),
        (
            "label",
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS as i64).map(|i| i % 10),
            )) as ArrayRef,
        ),
        (
            "jpeg",
            Arc::new(BinaryArray::from_iter_values(
                (0..ROWS).map(|i| vec![u8::try_from(i % 255).unwrap_or(0); 1536]),
            )) as ArrayRef,
        ),
        (
            "text",
            Arc::new(StringArray::from_iter_values(
                (0..ROWS).map(|_| text.as_str()),
            )) as ArrayRef,
        ),
        ("tensor", Arc::new(tensor.finish()) as ArrayRef),
        ("floats", Arc::new(floats.finish()) as ArrayRef),
    ])
    .unwrap()
}

fn decode(c: &mut Criterion) {
    let batch = table();
    let encoder = RowEncoder::new(&batch.schema()).unwrap();
    let prepared = encoder.prepare(&batch).unwrap();
    let records: Vec<Vec<u8>> = (0..ROWS)
        .map(|row| {
            let mut out = Vec::new();
            encoder.encode(&prepared, row, &mut out).unwrap();
            out
        })
        .collect();
    // 64 scattered rows.
    let picks: Vec<usize> = (0..BATCH).map(|i| (i * 7919) % ROWS).collect();
    let mut g = c.benchmark_group("decode_64");
    g.throughput(criterion::Throughput::Elements(BATCH as u64));
    g.bench_function("batch_decoder", |b| {
        let mut decoder = BatchDecoder::new(encoder.schema()).unwrap();
        b.iter(|| {
            for &i in &picks {
                decoder.push(&records[i]).unwrap();
            }
            black_box(decoder.finish().unwrap())
        })
    });
    g.bench_function("batch_decoder_new_each", |b| {
        b.iter(|| {
            let mut decoder = BatchDecoder::new(encoder.schema()).unwrap();
            for &i in &picks {
                decoder.push(&records[i]).unwrap();
            }
            black_box(decoder.finish().unwrap())
        })
    });
    g.bench_function("ceiling_copy", |b| {
        let mut out = Vec::with_capacity(1 << 20);
        b.iter(|| {
            out.clear();
            for &i in &picks {
                out.extend_from_slice(&records[i]);
            }
            black_box(out.len())
        })
    });
    let indices =
        UInt32Array::from_iter_values(picks.iter().map(|&i| u32::try_from(i).unwrap_or(0)));
    g.bench_function("ceiling_arrow_take", |b| {
        b.iter(|| black_box(arrow_select::take::take_record_batch(&prepared, &indices).unwrap()))
    });
    g.finish();
}

/// The group, in a module of its own (criterion's macro makes a public function).
mod group {
    criterion::criterion_group!(benches, super::decode);
}

criterion_main!(group::benches);
