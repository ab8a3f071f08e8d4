//! The asynchronous checks (the same as the synchronous ones, on `AsyncReader`s).

use std::sync::Arc;

use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::chunks;
use super::oracle::{self, ConcurrentOp, Obj};
use super::synchronous::{Offered, Run, judge_offer, judge_unsupported_platform, panic_message};
use super::{
    ConformanceError, ConformanceOptions, ConformanceReport, Fixture, Flavour, create_objects,
};
use crate::backend::Backend;
use crate::reader::AsyncReader;

impl<B: Backend + ?Sized> Run<'_, B> {
    /// Records the outcome of one async check.
    fn record(
        &mut self,
        check: &'static str,
        outcome: Result<(), String>,
    ) -> Result<(), ConformanceError> {
        match outcome {
            Ok(()) => {
                self.pass(check);
                Ok(())
            }
            Err(m) => Err(self.fail(check, m)),
        }
    }
}

pub(super) async fn run<B, F>(
    backend: &B,
    fixture: &F,
    options: &ConformanceOptions,
    contents: &oracle::Contents,
) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    let mut run = Run {
        backend,
        flavour: Flavour::Async,
        options,
        report: ConformanceReport::new(backend.name(), options.seed),
    };

    if !backend.is_supported() {
        let opened = backend.open_async(&fixture.missing()).await;
        let reason = judge_unsupported_platform(Flavour::Async, opened)
            .map_err(|m| run.fail("capabilities", m))?;
        run.pass("capabilities");
        run.report.skipped.push((Flavour::Async, reason));
        return Ok(run.report);
    }

    let objects = create_objects(fixture, Flavour::Async, contents)
        .await
        .map_err(|m| run.fail("fixture", m))?;

    let probe = backend.open_async(&objects[2].location).await;
    match judge_offer(Flavour::Async, backend.capabilities().r#async, probe) {
        Ok(Offered::Yes(r)) => {
            let _ = r.close().await;
            run.pass("capabilities");
        }
        Ok(Offered::No(reason)) => {
            run.pass("capabilities");
            run.report.skipped.push((Flavour::Async, reason));
            return Ok(run.report);
        }
        Err(m) => return Err(run.fail("capabilities", m)),
    }

    let large = &objects[3];
    let seed = options.seed;

    let outcome = async {
        let opened = backend.open_async(&fixture.missing()).await;
        match opened {
            Err(e) => oracle::check_not_found("open", &e)?,
            Ok(r) => {
                match r.size().await {
                    Err(e) => oracle::check_not_found("size() of a lazily opened reader", &e)?,
                    Ok(size) => {
                        return Err(format!(
                            "opening a missing object succeeded and size() answered {size}; \
                             expected Error::NotFound"
                        ));
                    }
                }
                let _ = r.close().await;
            }
        }
        Ok(())
    }
    .await;
    run.record("open_missing", outcome)?;

    let outcome = async {
        for o in &objects {
            let r = open(backend, o).await?;
            let size = r
                .size()
                .await
                .map_err(|e| format!("size() of `{}` failed: {e}", o.name))?;
            if size != o.size() {
                return Err(format!(
                    "size() of `{}` is {size}, expected {}",
                    o.name,
                    o.size()
                ));
            }
            if r.location().is_empty() {
                return Err(format!("location() of `{}` is empty", o.name));
            }
            if let Some(here) = r.as_sync() {
                let got = here
                    .size()
                    .map_err(|e| format!("size() of `{}` through as_sync() failed: {e}", o.name))?;
                if got != size || here.location() != r.location() {
                    return Err(format!(
                        "as_sync() of `{}` answers size {got} at `{}`, its reader {size} at `{}`",
                        o.name,
                        here.location(),
                        r.location()
                    ));
                }
            }
            let _ = r.close().await;
        }
        Ok(())
    }
    .await;
    run.record("size", outcome)?;

    let outcome = async {
        for o in objects.iter().filter(|o| o.size() > 0) {
            let r = open(backend, o).await?;
            let last = o.size() - 1;
            oracle::check_bytes(
                &format!("read(0, 1) of `{}`", o.name),
                r.read(0, 1).await,
                o.slice(0, 1),
                0,
            )?;
            oracle::check_bytes(
                &format!("read({last}, 1) of `{}`", o.name),
                r.read(last, 1).await,
                o.slice(last, 1),
                last,
            )?;
        }
        Ok(())
    }
    .await;
    run.record("first_last_byte", outcome)?;

    let outcome = async {
        for o in &objects {
            let r = open(backend, o).await?;
            for offset in [0, o.size() / 2, o.size()] {
                oracle::check_bytes(
                    &format!("read({offset}, 0) of `{}`", o.name),
                    r.read(offset, 0).await,
                    &[],
                    offset,
                )?;
            }
        }
        Ok(())
    }
    .await;
    run.record("zero_length", outcome)?;

    let outcome = async {
        for o in &objects {
            let r = open(backend, o).await?;
            oracle::check_bytes(
                &format!("read(0, {}) of `{}`", o.size(), o.name),
                r.read(0, o.size()).await,
                &o.bytes,
                0,
            )?;
        }
        Ok(())
    }
    .await;
    run.record("whole_object", outcome)?;

    let outcome = async {
        let r = open(backend, large).await?;
        for (offset, len) in chunks::boundary_reads(large.size()) {
            oracle::check_bytes(
                &format!("read({offset}, {len}) of `large`"),
                r.read(offset, len).await,
                large.slice(offset, len),
                offset,
            )?;
        }
        Ok(())
    }
    .await;
    run.record("chunk_boundaries", outcome)?;

    let outcome = async {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x01);
        for o in objects.iter().filter(|o| o.size() > 0) {
            let r = open(backend, o).await?;
            for (offset, len) in oracle::random_reads(&mut rng, o.size(), options.random_reads) {
                oracle::check_bytes(
                    &format!("read({offset}, {len}) of `{}`", o.name),
                    r.read(offset, len).await,
                    o.slice(offset, len),
                    offset,
                )?;
                if let Some(here) = r.as_sync() {
                    oracle::check_bytes(
                        &format!("as_sync().read({offset}, {len}) of `{}`", o.name),
                        here.read(offset, len),
                        o.slice(offset, len),
                        offset,
                    )?;
                }
            }
        }
        Ok(())
    }
    .await;
    run.record("random_ranges", outcome)?;

    let outcome = async {
        for o in &objects {
            let r = open(backend, o).await?;
            for (offset, len) in oracle::past_end(o.size()) {
                oracle::expect_out_of_range(
                    &format!("read({offset}, {len}) of `{}` (size {})", o.name, o.size()),
                    r.read(offset, len).await,
                )?;
                if let Some(here) = r.as_sync() {
                    oracle::expect_out_of_range(
                        &format!(
                            "as_sync().read({offset}, {len}) of `{}` (size {})",
                            o.name,
                            o.size()
                        ),
                        here.read(offset, len),
                    )?;
                }
            }
        }
        Ok(())
    }
    .await;
    run.record("past_end", outcome)?;

    let outcome = async {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x02);
        for o in &objects {
            let r = open(backend, o).await?;
            for ranges in oracle::range_lists(&mut rng, o.size()) {
                oracle::check_batch(&ranges, r.read_ranges(&ranges).await, &o.bytes)?;
                if let Some(here) = r.as_sync() {
                    oracle::check_batch(&ranges, here.read_ranges(&ranges), &o.bytes)
                        .map_err(|m| format!("as_sync(): {m}"))?;
                }
            }
            let bad = [0..o.size().min(1), o.size()..o.size() + 1];
            oracle::expect_out_of_range(
                &format!("read_ranges({bad:?}) of `{}` (size {})", o.name, o.size()),
                r.read_ranges(&bad).await,
            )?;
        }
        Ok(())
    }
    .await;
    run.record("read_ranges", outcome)?;

    let outcome = async {
        for o in &objects {
            let r = open(backend, o).await?;
            for len in oracle::tail_lens(o.size()) {
                oracle::check_tail(len, r.read_tail(len).await, &o.bytes)
                    .map_err(|m| format!("`{}`: {m}", o.name))?;
                if let Some(here) = r.as_sync() {
                    oracle::check_tail(len, here.read_tail(len), &o.bytes)
                        .map_err(|m| format!("`{}` as_sync(): {m}", o.name))?;
                }
            }
        }
        Ok(())
    }
    .await;
    run.record("read_tail", outcome)?;

    let outcome = async {
        let r: Arc<dyn AsyncReader> = Arc::from(open(backend, large).await?);
        concurrent(r, large.bytes.clone(), options).await
    }
    .await;
    run.record("concurrent_reads", outcome)?;

    let outcome = async {
        let o = &objects[2];
        let r = open(backend, o).await?;
        r.read(0, 1)
            .await
            .map_err(|e| format!("read(0, 1) failed: {e}"))?;
        r.close()
            .await
            .map_err(|e| format!("first close() failed: {e}"))?;
        r.close()
            .await
            .map_err(|e| format!("second close() failed: {e}"))?;
        r.close_sync();
        oracle::expect_closed("read(0, 1)", r.read(0, 1).await)?;
        if let Some(here) = r.as_sync() {
            oracle::expect_closed("as_sync().read(0, 1)", here.read(0, 1))?;
            oracle::expect_closed("as_sync().read_tail(1)", here.read_tail(1))?;
        }
        oracle::expect_closed("read(0, 0)", r.read(0, 0).await)?;
        oracle::expect_closed(
            "read_ranges([0..1, 1..1])",
            r.read_ranges(&[0..1, 1..1]).await,
        )?;
        oracle::expect_closed("read_tail(1)", r.read_tail(1).await)?;
        // close_sync (the cleanup path from Drop), then close, on a reader that never read.
        let fresh = open(backend, o).await?;
        fresh.close_sync();
        fresh.close_sync();
        fresh
            .close()
            .await
            .map_err(|e| format!("close() after close_sync() failed: {e}"))?;
        oracle::expect_closed("read(0, 1) after close_sync()", fresh.read(0, 1).await)
    }
    .await;
    run.record("close", outcome)?;

    let outcome = async {
        let o = large;
        let r = open(backend, o).await?;
        let whole = r
            .read(0, o.size())
            .await
            .map_err(|e| format!("read failed: {e}"))?;
        let part = r
            .read(o.size() / 3, 100)
            .await
            .map_err(|e| format!("read failed: {e}"))?;
        let tail = r
            .read_tail(50)
            .await
            .map_err(|e| format!("read_tail failed: {e}"))?;
        let batch = [0..10, 1000..5000];
        let parts = r
            .read_ranges(&batch)
            .await
            .map_err(|e| format!("read_ranges failed: {e}"))?;
        r.close()
            .await
            .map_err(|e| format!("close() failed: {e}"))?;
        drop(r);
        oracle::same(
            "a whole-object buffer read before close",
            &whole,
            &o.bytes,
            0,
        )?;
        oracle::same(
            "a buffer read before close",
            &part,
            o.slice(o.size() / 3, 100),
            o.size() / 3,
        )?;
        oracle::same(
            "a tail read before close",
            &tail.bytes,
            o.slice(o.size() - 50, 50),
            o.size() - 50,
        )?;
        oracle::check_batch(&batch, Ok(parts), &o.bytes)
    }
    .await;
    run.record("buffers_outlive_close", outcome)?;

    Ok(run.report)
}

/// Opens an async reader of `o`, describing a failure.
async fn open<B: Backend + ?Sized>(
    backend: &B,
    o: &Obj<B::Location>,
) -> Result<Box<dyn AsyncReader>, String> {
    backend
        .open_async(&o.location)
        .await
        .map_err(|e| format!("opening `{}` failed: {e}", o.name))
}

/// Many tokio tasks sharing one reader, each reading interleaved random ranges.
async fn concurrent(
    r: Arc<dyn AsyncReader>,
    reference: Bytes,
    options: &ConformanceOptions,
) -> Result<(), String> {
    let tasks = options.threads.max(2);
    let overlap = Arc::new(oracle::Overlap::new(options.iterations, tasks));
    let size = reference.len() as u64;
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (r, reference, overlap) = (Arc::clone(&r), reference.clone(), Arc::clone(&overlap));
            let seed = options.seed;
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed ^ (0x200 + t as u64));
                let mut i = 0;
                while overlap.keep_going(i) {
                    if overlap.past_quota(i) {
                        // Let the tasks still short of their quota run (current-thread runtimes).
                        tokio::task::yield_now().await;
                    }
                    let outcome = match oracle::concurrent_op(&mut rng, size, i) {
                        ConcurrentOp::Batch(ranges) => {
                            let token = overlap.begin();
                            let got = r.read_ranges(&ranges).await;
                            overlap.end(token);
                            oracle::check_batch(&ranges, got, &reference)
                        }
                        ConcurrentOp::Read(range) => {
                            let (off, len) = (range.start, range.end - range.start);
                            let (a, b) = (oracle::to_usize(off), oracle::to_usize(off + len));
                            let token = overlap.begin();
                            let got = r.read(off, len).await;
                            overlap.end(token);
                            oracle::check_read(off, len, got, &reference[a..b])
                        }
                    };
                    if let Err(m) = outcome {
                        overlap.stop();
                        return Err(format!(
                            "task {t} of {tasks}, iteration {i} ({} overlapping reads so far): \
                             {m} (concurrent reads on one reader interfere: a shared cursor \
                             or buffer without synchronisation?)",
                            overlap.overlaps()
                        ));
                    }
                    i += 1;
                }
                Ok(())
            })
        })
        .collect();
    let mut first = None;
    for h in handles {
        let outcome = match h.await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => Err(format!(
                "a reading task panicked: {}",
                panic_message(&*e.into_panic())
            )),
            Err(e) => Err(format!("a reading task failed: {e}")),
        };
        if let Err(m) = outcome {
            first.get_or_insert(m);
        }
    }
    match first {
        Some(m) => Err(m),
        None => Ok(()),
    }
}
