//! The synchronous checks.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Barrier, Mutex};

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::chunks;
use super::oracle::{self, ConcurrentOp, Obj};
use super::{
    ConformanceError, ConformanceOptions, ConformanceReport, Fixture, Flavour, block_on,
    create_objects,
};
use crate::backend::Backend;
use crate::error::Error;
use crate::reader::SyncReader;

/// The state of one run: where to record passes, and how to build failures.
pub(super) struct Run<'a, B: ?Sized> {
    pub(super) backend: &'a B,
    pub(super) flavour: Flavour,
    pub(super) options: &'a ConformanceOptions,
    pub(super) report: ConformanceReport,
}

impl<B: Backend + ?Sized> Run<'_, B> {
    pub(super) fn fail(&self, check: &'static str, message: impl Into<String>) -> ConformanceError {
        ConformanceError {
            backend: self.backend.name(),
            flavour: self.flavour,
            check,
            message: message.into(),
            seed: self.options.seed,
        }
    }

    pub(super) fn pass(&mut self, check: &'static str) {
        self.report.passed.push((self.flavour, check));
    }

    /// Runs one check, turning an `Err` or a panic into a [`ConformanceError`].
    fn check(
        &mut self,
        check: &'static str,
        f: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), ConformanceError> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(())) => {
                self.pass(check);
                Ok(())
            }
            Ok(Err(message)) => Err(self.fail(check, message)),
            Err(panic) => Err(self.fail(check, format!("panicked: {}", panic_message(&*panic)))),
        }
    }
}

/// The text of a panic payload.
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

/// What the `capabilities` check decided about a flavour.
pub(super) enum Offered<R> {
    /// The flavour works; here is a reader of an existing object to close.
    Yes(R),
    /// The flavour is not offered, and honestly so; the reason.
    No(String),
}

/// Judges the answer of a constructor on an existing object against the capability claim.
pub(super) fn judge_offer<R>(
    flavour: Flavour,
    claimed: bool,
    opened: Result<R, Error>,
) -> Result<Offered<R>, String> {
    match (opened, claimed) {
        (Ok(r), true) => Ok(Offered::Yes(r)),
        (Err(Error::Unsupported { reason, .. }), false) => Ok(Offered::No(reason)),
        (Ok(_), false) => Err(format!(
            "capabilities().{} is false, but opening a {flavour} reader succeeded",
            field(flavour)
        )),
        (Err(e @ Error::Unsupported { .. }), true) => Err(format!(
            "capabilities().{} is true, but opening a {flavour} reader answered: {e}",
            field(flavour)
        )),
        (Err(e), _) => Err(format!(
            "opening a {flavour} reader of an existing object failed: {e}"
        )),
    }
}

fn field(flavour: Flavour) -> &'static str {
    match flavour {
        Flavour::Sync => "sync",
        Flavour::Async => "r#async",
    }
}

/// Judges the answer of a backend that says it is not supported on this platform.
pub(super) fn judge_unsupported_platform<R>(
    flavour: Flavour,
    opened: Result<R, Error>,
) -> Result<String, String> {
    match opened {
        Err(Error::Unsupported { reason, .. }) => Ok(format!(
            "backend is not supported on this platform: {reason}"
        )),
        Ok(_) => Err(format!(
            "is_supported() is false, but opening a {flavour} reader succeeded"
        )),
        Err(e) => Err(format!(
            "is_supported() is false, so opening a {flavour} reader must answer \
             Error::Unsupported, but it answered: {e}"
        )),
    }
}

pub(super) fn run<B, F>(
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
        flavour: Flavour::Sync,
        options,
        report: ConformanceReport::new(backend.name(), options.seed),
    };

    if !backend.is_supported() {
        let reason = judge_unsupported_platform(Flavour::Sync, backend.open(&fixture.missing()))
            .map_err(|m| run.fail("capabilities", m))?;
        run.pass("capabilities");
        run.report.skipped.push((Flavour::Sync, reason));
        return Ok(run.report);
    }

    let objects = block_on(create_objects(fixture, Flavour::Sync, contents))
        .map_err(|e| run.fail("fixture", format!("cannot run the fixture: {e}")))?
        .map_err(|m| run.fail("fixture", m))?;

    let probe = backend.open(&objects[2].location);
    match judge_offer(Flavour::Sync, backend.capabilities().sync, probe) {
        Ok(Offered::Yes(r)) => {
            let _ = r.close();
            run.pass("capabilities");
        }
        Ok(Offered::No(reason)) => {
            run.pass("capabilities");
            run.report.skipped.push((Flavour::Sync, reason));
            return Ok(run.report);
        }
        Err(m) => return Err(run.fail("capabilities", m)),
    }

    let open = |o: &Obj<B::Location>| -> Result<Box<dyn SyncReader>, String> {
        backend
            .open(&o.location)
            .map_err(|e| format!("opening `{}` failed: {e}", o.name))
    };
    let large = &objects[3];
    let seed = options.seed;

    run.check("open_missing", || {
        let opened = backend.open(&fixture.missing());
        match opened {
            Err(e) => oracle::check_not_found("open", &e)?,
            Ok(r) => {
                match r.size() {
                    Err(e) => oracle::check_not_found("size() of a lazily opened reader", &e)?,
                    Ok(size) => {
                        return Err(format!(
                            "opening a missing object succeeded and size() answered {size}; \
                             expected Error::NotFound"
                        ));
                    }
                }
                let _ = r.close();
            }
        }
        Ok(())
    })?;

    run.check("size", || {
        for o in &objects {
            let r = open(o)?;
            let size = r
                .size()
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
            let _ = r.close();
        }
        Ok(())
    })?;

    run.check("first_last_byte", || {
        for o in objects.iter().filter(|o| o.size() > 0) {
            let r = open(o)?;
            let last = o.size() - 1;
            oracle::check_bytes(
                &format!("read(0, 1) of `{}`", o.name),
                r.read(0, 1),
                o.slice(0, 1),
                0,
            )?;
            oracle::check_bytes(
                &format!("read({last}, 1) of `{}`", o.name),
                r.read(last, 1),
                o.slice(last, 1),
                last,
            )?;
        }
        Ok(())
    })?;

    run.check("zero_length", || {
        for o in &objects {
            let r = open(o)?;
            for offset in [0, o.size() / 2, o.size()] {
                oracle::check_bytes(
                    &format!("read({offset}, 0) of `{}`", o.name),
                    r.read(offset, 0),
                    &[],
                    offset,
                )?;
            }
        }
        Ok(())
    })?;

    run.check("whole_object", || {
        for o in &objects {
            let r = open(o)?;
            oracle::check_bytes(
                &format!("read(0, {}) of `{}`", o.size(), o.name),
                r.read(0, o.size()),
                &o.bytes,
                0,
            )?;
        }
        Ok(())
    })?;

    run.check("chunk_boundaries", || {
        let r = open(large)?;
        for (offset, len) in chunks::boundary_reads(large.size()) {
            oracle::check_bytes(
                &format!("read({offset}, {len}) of `large`"),
                r.read(offset, len),
                large.slice(offset, len),
                offset,
            )?;
        }
        Ok(())
    })?;

    run.check("random_ranges", || {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x01);
        for o in objects.iter().filter(|o| o.size() > 0) {
            let r = open(o)?;
            for (offset, len) in oracle::random_reads(&mut rng, o.size(), options.random_reads) {
                oracle::check_bytes(
                    &format!("read({offset}, {len}) of `{}`", o.name),
                    r.read(offset, len),
                    o.slice(offset, len),
                    offset,
                )?;
            }
        }
        Ok(())
    })?;

    run.check("past_end", || {
        for o in &objects {
            let r = open(o)?;
            for (offset, len) in oracle::past_end(o.size()) {
                oracle::expect_out_of_range(
                    &format!("read({offset}, {len}) of `{}` (size {})", o.name, o.size()),
                    r.read(offset, len),
                )?;
            }
        }
        Ok(())
    })?;

    run.check("read_ranges", || {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x02);
        for o in &objects {
            let r = open(o)?;
            for ranges in oracle::range_lists(&mut rng, o.size()) {
                oracle::check_batch(&ranges, r.read_ranges(&ranges), &o.bytes)?;
            }
            let bad = [0..o.size().min(1), o.size()..o.size() + 1];
            oracle::expect_out_of_range(
                &format!("read_ranges({bad:?}) of `{}` (size {})", o.name, o.size()),
                r.read_ranges(&bad),
            )?;
        }
        Ok(())
    })?;

    run.check("read_tail", || {
        for o in &objects {
            let r = open(o)?;
            for len in oracle::tail_lens(o.size()) {
                oracle::check_tail(len, r.read_tail(len), &o.bytes)
                    .map_err(|m| format!("`{}`: {m}", o.name))?;
            }
        }
        Ok(())
    })?;

    run.check("concurrent_reads", || {
        let r = open(large)?;
        concurrent(&*r, &large.bytes, options)
    })?;

    run.check("close", || {
        let o = &objects[2];
        let r = open(o)?;
        r.read(0, 1)
            .map_err(|e| format!("read(0, 1) failed: {e}"))?;
        r.close()
            .map_err(|e| format!("first close() failed: {e}"))?;
        r.close()
            .map_err(|e| format!("second close() failed: {e}"))?;
        oracle::expect_closed("read(0, 1)", r.read(0, 1))?;
        oracle::expect_closed("read(0, 0)", r.read(0, 0))?;
        oracle::expect_closed("read_ranges([0..1, 1..1])", r.read_ranges(&[0..1, 1..1]))?;
        oracle::expect_closed("read_tail(1)", r.read_tail(1))?;
        // A reader that never read anything (a lazy reader is only partly open).
        let fresh = open(o)?;
        fresh
            .close()
            .map_err(|e| format!("close() of an unused reader failed: {e}"))?;
        fresh
            .close()
            .map_err(|e| format!("second close() of an unused reader failed: {e}"))?;
        oracle::expect_closed("read(0, 1) on a closed unused reader", fresh.read(0, 1))
    })?;

    run.check("buffers_outlive_close", || {
        let o = large;
        let r = open(o)?;
        let whole = r
            .read(0, o.size())
            .map_err(|e| format!("read failed: {e}"))?;
        let part = r
            .read(o.size() / 3, 100)
            .map_err(|e| format!("read failed: {e}"))?;
        let tail = r
            .read_tail(50)
            .map_err(|e| format!("read_tail failed: {e}"))?;
        let batch = [0..10, 1000..5000];
        let parts = r
            .read_ranges(&batch)
            .map_err(|e| format!("read_ranges failed: {e}"))?;
        r.close().map_err(|e| format!("close() failed: {e}"))?;
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
    })?;

    Ok(run.report)
}

/// Many threads sharing one reader, each reading interleaved random ranges.
fn concurrent(
    r: &dyn SyncReader,
    reference: &[u8],
    options: &ConformanceOptions,
) -> Result<(), String> {
    let threads = options.threads.max(2);
    let barrier = Barrier::new(threads);
    let overlap = oracle::Overlap::new(options.iterations, threads);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let size = reference.len() as u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, overlap, first_error) = (&barrier, &overlap, &first_error);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(options.seed ^ (0x100 + t as u64));
                barrier.wait();
                let mut i = 0;
                while overlap.keep_going(i) {
                    let outcome = match oracle::concurrent_op(&mut rng, size, i) {
                        ConcurrentOp::Batch(ranges) => {
                            let token = overlap.begin();
                            let got = r.read_ranges(&ranges);
                            overlap.end(token);
                            oracle::check_batch(&ranges, got, reference)
                        }
                        ConcurrentOp::Read(range) => {
                            let (off, len) = (range.start, range.end - range.start);
                            let token = overlap.begin();
                            let got = r.read(off, len);
                            overlap.end(token);
                            let want =
                                &reference[oracle::to_usize(off)..oracle::to_usize(off + len)];
                            oracle::check_read(off, len, got, want)
                        }
                    };
                    if let Err(m) = outcome {
                        overlap.stop();
                        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert(format!(
                            "thread {t} of {threads}, iteration {i} ({} overlapping reads so \
                             far): {m} (concurrent reads on one reader interfere: a shared \
                             cursor or buffer without synchronisation?)",
                            overlap.overlaps()
                        ));
                        return;
                    }
                    i += 1;
                }
            });
        }
    });
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(m) => Err(m),
        None => Ok(()),
    }
}
