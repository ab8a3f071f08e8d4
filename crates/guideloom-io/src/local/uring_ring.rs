//! `UringIo`'s engine: one batch of reads submitted to an io_uring at a queue depth,
//! completions reaped, short reads resubmitted for the rest.
//!
//! Each thread keeps one ring (created on its first batch, grown if a later batch asks for a
//! deeper queue) and every reader on that thread shares it: a batch submits and reaps all of
//! its reads before it returns, so a ring never holds another batch's reads, and no lock is
//! taken. Threads of tokio's blocking pool each get their own ring, dropped when the thread
//! exits.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

use io_uring::{IoUring, opcode, squeue, types};

use crate::error::Error;

/// One read of a batch: `len` bytes of the file at `offset` into `ptr`, done once at least
/// `need` bytes have arrived (`need < len` only for `O_DIRECT` reads rounded up past the end
/// of the file, where the kernel stops at the end).
#[derive(Debug)]
pub(super) struct Op {
    /// File offset of the read's first byte.
    pub(super) offset: u64,
    /// Where its first byte goes; valid for writes of `len` bytes until the batch returns.
    pub(super) ptr: *mut u8,
    /// Bytes asked of the kernel.
    pub(super) len: usize,
    /// Bytes that must arrive (end of file before them is a short read).
    pub(super) need: usize,
    /// Bytes arrived so far.
    pub(super) done: usize,
    /// The range the caller asked for, `(offset, len)`, for a short-read error.
    pub(super) asked: (u64, u64),
    /// `EAGAIN`/`EINTR` completions so far.
    retries: u32,
}

impl Op {
    /// A read of `len` bytes at `offset` into `ptr`, done at `need` bytes.
    pub(super) fn new(offset: u64, ptr: *mut u8, len: usize, need: usize, asked: (u64, u64)) -> Op {
        Op {
            offset,
            ptr,
            len,
            need,
            done: 0,
            asked,
            retries: 0,
        }
    }
}

/// Longest read of one submission entry (its length is a `u32`); a multiple of every direct-IO
/// alignment. A longer read completes short and its rest is resubmitted.
const MAX_ENTRY_LEN: usize = 1 << 30;

/// An op answered `EAGAIN` or `EINTR` this many times fails with that error.
const MAX_RETRIES: u32 = 64;

/// Consecutive failed `io_uring_enter` calls (`EAGAIN`, `EBUSY`, `EINTR`) tolerated.
const MAX_ENTER_RETRIES: u32 = 1024;

/// How a batch failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// A read failed (or the file ended early); every other read of the batch was reaped, so
    /// the buffers are the caller's again.
    Read(Error),
    /// The ring itself failed with reads still in flight: the kernel may yet write into their
    /// buffers, which must therefore never be freed or reused (the caller leaks them).
    Abandoned(Error),
}

thread_local! {
    /// This thread's ring, shared by every reader that runs a batch on it.
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Ring size for a queue depth: a power of two, at most 4096.
pub(super) fn ring_entries(depth: u32) -> u32 {
    depth.clamp(1, 4096).next_power_of_two()
}

/// Whether this process may create io_uring instances (`io_uring_setup` can be absent, disabled
/// by `kernel.io_uring_disabled`, or filtered by a seccomp profile).
pub(super) fn probe() -> io::Result<()> {
    IoUring::new(2).map(drop)
}

/// The error for a ring that could not be created or driven.
pub(super) fn ring_error(location: &str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOSYS | libc::EPERM | libc::EACCES) => Error::unsupported(
            "UringIo",
            "io_uring",
            format!("io_uring_setup refused ({e}); use PreadIo"),
        ),
        _ => Error::io(location, e),
    }
}

/// Runs `ops` on `fd` with at most `depth` in flight, on this thread's ring.
///
/// On `Ok` every op has at least `need` bytes written from `ptr` on (and `done` says how
/// many).
pub(super) fn run(location: &str, fd: RawFd, ops: &mut [Op], depth: u32) -> Result<(), Failure> {
    if ops.is_empty() {
        return Ok(());
    }
    let entries = ring_entries(depth);
    let fresh = || IoUring::new(entries).map_err(|e| Failure::Read(ring_error(location, e)));
    RING.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot
                .as_ref()
                .is_none_or(|r| r.params().sq_entries() < entries)
            {
                *slot = None;
            }
            let ring = match &mut *slot {
                Some(ring) => ring,
                empty => empty.insert(fresh()?),
            };
            let result = drive(location, ring, fd, ops, depth);
            if let Err(Failure::Abandoned(_)) = &result {
                // The kernel may still hold reads of this ring: keep its memory mapped.
                std::mem::forget(slot.take());
            }
            result
        }
        // A batch inside a batch on one thread cannot happen through the readers; should it,
        // a ring of its own keeps the two apart.
        Err(_) => {
            let mut ring = fresh()?;
            let result = drive(location, &mut ring, fd, ops, depth);
            if let Err(Failure::Abandoned(_)) = &result {
                std::mem::forget(ring);
            }
            result
        }
    })
}

/// The submission entry for the rest of op `i`.
fn entry(fd: RawFd, op: &Op, i: usize) -> squeue::Entry {
    let rest = (op.len - op.done).min(MAX_ENTRY_LEN);
    opcode::Read::new(
        types::Fd(fd),
        op.ptr.wrapping_add(op.done),
        u32::try_from(rest).unwrap_or(u32::MAX),
    )
    .offset(op.offset + op.done as u64)
    .build()
    .user_data(i as u64)
}

/// Submits and reaps until every op is done or has failed; on a failed read, stops
/// submitting and reaps what is in flight before returning the first error.
#[allow(unsafe_code)]
fn drive(
    location: &str,
    ring: &mut IoUring,
    fd: RawFd,
    ops: &mut [Op],
    depth: u32,
) -> Result<(), Failure> {
    let depth = usize::try_from(depth.clamp(1, ring.params().sq_entries())).unwrap_or(1);
    let mut queue: VecDeque<usize> = (0..ops.len()).filter(|&i| ops[i].need > 0).collect();
    let mut in_flight = 0usize;
    let mut first_error: Option<Error> = None;
    let mut enter_failures = 0u32;
    loop {
        while first_error.is_none() && in_flight < depth {
            let Some(&i) = queue.front() else { break };
            let sqe = entry(fd, &ops[i], i);
            // SAFETY: the entry reads into `ops[i].ptr + done`, which the caller keeps valid
            // for writes of `len` bytes, and exclusively ours, until this function returns;
            // it does not return while the read is in flight (every pushed entry is reaped
            // below, or the batch is `Abandoned` and its buffers leaked). `fd` stays open for
            // the same span (the caller holds the reader's file lock).
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                break; // the queue is full: submit what it holds first
            }
            queue.pop_front();
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        match ring.submit_and_wait(1) {
            Ok(_) => enter_failures = 0,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) && enter_failures < MAX_ENTER_RETRIES =>
            {
                enter_failures += 1;
            }
            Err(e) => return Err(Failure::Abandoned(ring_error(location, e))),
        }
        for cqe in ring.completion() {
            in_flight = in_flight.saturating_sub(1);
            let Some(i) = usize::try_from(cqe.user_data())
                .ok()
                .filter(|&i| i < ops.len())
            else {
                continue;
            };
            let op = &mut ops[i];
            match usize::try_from(cqe.result()) {
                Ok(0) if op.done < op.need => {
                    if first_error.is_none() {
                        let skip = op.asked.0.saturating_sub(op.offset);
                        first_error = Some(Error::ShortRead {
                            location: location.to_owned(),
                            offset: op.asked.0,
                            requested: op.asked.1,
                            got: (op.done as u64).saturating_sub(skip).min(op.asked.1),
                        });
                    }
                }
                Ok(n) => {
                    op.done += n;
                    if op.done < op.need {
                        queue.push_front(i); // a short read: submit the rest
                    }
                }
                Err(_) => {
                    let errno = cqe.result().saturating_neg();
                    let transient = errno == libc::EAGAIN || errno == libc::EINTR;
                    if transient && op.retries < MAX_RETRIES {
                        op.retries += 1;
                        queue.push_front(i);
                    } else if first_error.is_none() {
                        first_error =
                            Some(Error::io(location, io::Error::from_raw_os_error(errno)));
                    }
                }
            }
        }
    }
    match first_error {
        Some(e) => Err(Failure::Read(e)),
        None => Ok(()),
    }
}
