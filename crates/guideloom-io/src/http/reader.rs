//! [`HttpReader`]: the reader of one object below an [`HttpIo`](super::HttpIo) base URL.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use http::header::{self, HeaderMap};
use http::{Method, StatusCode, Uri};

use super::multipart::{self, ContentRange};
use super::{BodyLimits, Budget, Call, Fetched, Inner};
use crate::coalesce::{self, MergedRange};
use crate::error::{Error, Result, check_range, wrong_len};
use crate::pin::Pin;
use crate::reader::{AsyncReader, Tail};
use crate::stats::RequestStats;

/// Largest suffix length sent (2^53 bytes): origins reject suffixes beyond their offset type
/// (nginx answers 416 above `off_t`), and no object is this large.
const MAX_SUFFIX: u64 = 1 << 53;

/// Multipart overhead allowed per part (boundary line and part headers), in bytes.
const MULTIPART_PART_OVERHEAD: usize = 512;
/// Multipart overhead allowed per response (preamble, epilogue), in bytes.
const MULTIPART_FIXED_OVERHEAD: usize = 16 * 1024;

/// Reader of one object over HTTP range requests. Opened by
/// [`HttpIo::open_reader`](super::HttpIo::open_reader) (or `open_async`), without a request.
///
/// It serves one version of the object: the strong `ETag` of its first response (HEAD or
/// GET) is pinned and sent as `If-Match` on every later request, and every later response
/// must carry it. An object replaced behind the reader is [`Error::Changed`] at the first
/// read after the swap (the origin answers 412, or another `ETag`), with no extra request.
/// An origin that sends no `ETag`, or a weak one, is not pinned.
pub struct HttpReader {
    inner: Arc<Inner>,
    uri: Uri,
    display: String,
    size: OnceLock<u64>,
    stats: Arc<RequestStats>,
    closed: AtomicBool,
    pin: Pin,
}

impl fmt::Debug for HttpReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpReader")
            .field("url", &self.display)
            .field("size", &self.size.get())
            .field("etag", &self.pin.get())
            .field("stats", &self.stats.snapshot())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

fn to_usize(location: &str, n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::InvalidArgument {
        message: format!("{n} bytes requested from {location} do not fit in memory"),
    })
}

fn header_str<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `bytes=a-b,c-d` for half-open ranges (all non-empty).
fn range_header(ranges: &[Range<u64>]) -> String {
    let mut s = String::from("bytes=");
    for (i, r) in ranges.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{}-{}", r.start, r.end - 1));
    }
    s
}

impl HttpReader {
    pub(crate) fn new(inner: Arc<Inner>, uri: Uri, display: String) -> Self {
        HttpReader {
            inner,
            uri,
            display,
            size: OnceLock::new(),
            stats: Arc::new(RequestStats::new()),
            closed: AtomicBool::new(false),
            pin: Pin::default(),
        }
    }

    /// The entity tag this reader pinned: the strong `ETag` of its first response that
    /// carried one (`None` before, or for an origin that sends none). Every later request
    /// sends it as `If-Match`.
    pub fn etag(&self) -> Option<&str> {
        self.pin.get()
    }

    /// Pins or checks the `ETag` of a response (see [`Pin::observe`]).
    fn observe_etag(&self, f: &Fetched) -> Result<()> {
        self.pin
            .observe(&self.display, header_str(&f.headers, &header::ETAG))
    }

    /// Counters of this reader's requests (each attempt counts) and bytes received.
    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.stats
    }

    /// The object's size if already known (from a HEAD or any `Content-Range`).
    pub fn known_size(&self) -> Option<u64> {
        self.size.get().copied()
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed {
                location: self.display.clone(),
            })
        } else {
            Ok(())
        }
    }

    fn learn_size(&self, total: Option<u64>) {
        if let Some(t) = total {
            let _ = self.size.set(t);
        }
    }

    /// One ranged GET, `If-Match` the pinned entity tag: a 412 to it, or a success with
    /// another `ETag`, is [`Error::Changed`].
    async fn get(&self, range: &str, limits: BodyLimits, budget: &Budget) -> Result<Fetched> {
        let if_match = self.pin.get();
        let call = Call {
            reader_stats: &self.stats,
            location: &self.display,
            range: Some(range),
            accept: None,
            if_match,
            limits,
            budget,
        };
        let f = self.inner.send(Method::GET, &self.uri, call).await?;
        if f.status == StatusCode::PRECONDITION_FAILED && if_match.is_some() {
            return Err(self.pin.refused(&self.display));
        }
        if f.status.is_success() {
            self.observe_etag(&f)?;
        }
        Ok(f)
    }

    fn content_range(&self, f: &Fetched) -> Result<ContentRange> {
        let value = header_str(&f.headers, &header::CONTENT_RANGE).ok_or_else(|| {
            Inner::protocol_error(
                &self.display,
                format!("HTTP {} without a Content-Range header", f.status),
            )
        })?;
        multipart::parse_content_range(value).ok_or_else(|| {
            Inner::protocol_error(
                &self.display,
                format!("HTTP {} with a malformed Content-Range {value:?}", f.status),
            )
        })
    }

    /// A 200 with `Content-Length: 0` to a ranged GET: the object is empty (nginx, for one,
    /// answers ranges on empty files this way), so every non-empty range is out of range.
    fn empty_object(&self, f: &Fetched) -> bool {
        f.status == StatusCode::OK && super::content_length(&f.headers) == Some(0)
    }

    /// The error for a 416 answer (or a 200 for an empty object) to a request for `ranges`.
    fn out_of_range(&self, f: &Fetched, ranges: &[Range<u64>]) -> Error {
        let total = if self.empty_object(f) {
            Some(0)
        } else {
            header_str(&f.headers, &header::CONTENT_RANGE)
                .and_then(multipart::parse_content_range)
                .and_then(|c| c.total)
        };
        self.learn_size(total);
        let size = total.unwrap_or(u64::MAX);
        let bad = ranges
            .iter()
            .find(|r| r.end > size)
            .or(ranges.last())
            .cloned()
            .unwrap_or(0..0);
        Error::OutOfRange {
            location: self.display.clone(),
            offset: bad.start,
            len: bad.end - bad.start,
            size,
        }
    }

    /// One ranged GET for a non-empty range; only a 206 with exactly that range succeeds.
    async fn fetch_range(&self, offset: u64, len: u64, budget: &Budget) -> Result<Bytes> {
        let end = offset.checked_add(len).ok_or_else(|| Error::OutOfRange {
            location: self.display.clone(),
            offset,
            len,
            size: self.known_size().unwrap_or(u64::MAX),
        })?;
        let limits = BodyLimits {
            partial: to_usize(&self.display, len)?,
            full: None,
            unsized_full: false,
            offset,
        };
        let f = self
            .get(&format!("bytes={offset}-{}", end - 1), limits, budget)
            .await?;
        match f.status {
            StatusCode::PARTIAL_CONTENT => {}
            StatusCode::OK if self.empty_object(&f) => {
                return Err(self.out_of_range(&f, std::slice::from_ref(&(offset..end))));
            }
            StatusCode::OK => {
                return Err(Inner::protocol_error(
                    &self.display,
                    "origin ignored the Range header (HTTP 200 to a ranged GET)".into(),
                ));
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                return Err(self.out_of_range(&f, std::slice::from_ref(&(offset..end))));
            }
            _ => return Err(self.inner.status_error(&self.display, &f, "GET")),
        }
        let cr = self.content_range(&f)?;
        self.learn_size(cr.total);
        let got = cr.range.clone().unwrap_or(0..0);
        if got.start != offset {
            return Err(Inner::protocol_error(
                &self.display,
                format!(
                    "asked for bytes {offset}-{} but Content-Range says {}-{}",
                    end - 1,
                    got.start,
                    got.end.saturating_sub(1)
                ),
            ));
        }
        if got.end < end {
            // The origin clipped the range at the end of the object.
            if let Some(total) = cr.total
                && total < end
            {
                return Err(Error::OutOfRange {
                    location: self.display.clone(),
                    offset,
                    len,
                    size: total,
                });
            }
            return Err(Error::ShortRead {
                location: self.display.clone(),
                offset,
                requested: len,
                got: got.end - got.start,
            });
        }
        if got.end > end {
            return Err(Inner::protocol_error(
                &self.display,
                format!(
                    "asked for bytes {offset}-{} but Content-Range says {}-{}",
                    end - 1,
                    got.start,
                    got.end - 1
                ),
            ));
        }
        if let Some(e) = wrong_len(&self.display, offset, len, f.body.len() as u64) {
            return Err(e);
        }
        Ok(f.body)
    }

    /// One buffer per merged range (all non-empty), fetched with single-range requests
    /// under the concurrency limit.
    async fn fetch_singles(&self, merged: &[Range<u64>], budget: &Budget) -> Result<Vec<Bytes>> {
        let limit = self.inner.options().max_concurrency();
        let mut out: Vec<(usize, Bytes)> = stream::iter(merged.iter().cloned().enumerate())
            .map(|(i, r)| async move {
                let b = self.fetch_range(r.start, r.end - r.start, budget).await?;
                Ok::<_, Error>((i, b))
            })
            .buffer_unordered(limit)
            .try_collect()
            .await?;
        out.sort_by_key(|(i, _)| *i);
        Ok(out.into_iter().map(|(_, b)| b).collect())
    }

    /// One multi-range GET for `group` (sorted, disjoint, non-empty ranges); falls back to
    /// single-range requests when the origin does not answer with multipart.
    async fn fetch_group(&self, group: &[Range<u64>], budget: &Budget) -> Result<Vec<Bytes>> {
        if group.len() == 1 {
            return Ok(vec![
                self.fetch_range(group[0].start, group[0].end - group[0].start, budget)
                    .await?,
            ]);
        }
        let mut want: usize = 0;
        for r in group {
            want = want.saturating_add(to_usize(&self.display, r.end - r.start)?);
        }
        let limit = want
            .saturating_add(MULTIPART_PART_OVERHEAD.saturating_mul(group.len()))
            .saturating_add(MULTIPART_FIXED_OVERHEAD);
        let limits = BodyLimits {
            partial: limit,
            full: None,
            unsized_full: false,
            offset: group[0].start,
        };
        let f = self.get(&range_header(group), limits, budget).await?;
        match f.status {
            StatusCode::PARTIAL_CONTENT => {}
            StatusCode::OK if self.empty_object(&f) => return Err(self.out_of_range(&f, group)),
            StatusCode::OK => {
                self.inner
                    .disable_multi_range(&self.display, "HTTP 200 to a multi-range GET");
                return self.fetch_singles(group, budget).await;
            }
            StatusCode::RANGE_NOT_SATISFIABLE => return Err(self.out_of_range(&f, group)),
            _ => return Err(self.inner.status_error(&self.display, &f, "GET")),
        }
        let boundary =
            header_str(&f.headers, &header::CONTENT_TYPE).and_then(multipart::byteranges_boundary);
        let parts = match boundary {
            Some(ref b) => multipart::parse_byteranges(&f.body, b).map_err(|e| {
                Inner::protocol_error(&self.display, format!("bad multipart/byteranges: {}", e.0))
            })?,
            None => {
                // A single part: the origin coalesced the ranges, or answered only some.
                let cr = self.content_range(&f)?;
                let Some(range) = cr.range else {
                    return Err(Inner::protocol_error(
                        &self.display,
                        "HTTP 206 with Content-Range bytes */N".into(),
                    ));
                };
                let want = range.end - range.start;
                if let Some(e) = wrong_len(&self.display, range.start, want, f.body.len() as u64) {
                    return Err(e);
                }
                vec![multipart::Part {
                    range,
                    total: cr.total,
                    data: f.body.clone(),
                }]
            }
        };
        if let Some(total) = parts.iter().find_map(|p| p.total) {
            self.learn_size(Some(total));
        }
        let body_len = f.body.len();
        let mut out = Vec::with_capacity(group.len());
        let mut missing = Vec::new();
        for (i, r) in group.iter().enumerate() {
            match multipart::extract(&parts, r) {
                // Copy small pieces so they do not pin the whole response body.
                Some(b) if b.len() * coalesce::COPY_OUT_DIVISOR < body_len => {
                    out.push(Bytes::copy_from_slice(&b));
                }
                Some(b) => out.push(b),
                None => {
                    out.push(Bytes::new());
                    missing.push(i);
                }
            }
        }
        if !missing.is_empty() {
            // Origins skip unsatisfiable ranges and clip ranges at the end: with the size
            // known, a missing range past the end is OutOfRange.
            if let Some(size) = self.known_size()
                && let Some(&i) = missing.iter().find(|&&i| group[i].end > size)
            {
                return Err(Error::OutOfRange {
                    location: self.display.clone(),
                    offset: group[i].start,
                    len: group[i].end - group[i].start,
                    size,
                });
            }
            if boundary.is_some() {
                let r = &group[missing[0]];
                return Err(Inner::protocol_error(
                    &self.display,
                    format!(
                        "multipart/byteranges answer does not cover bytes {}-{} ({} of {} ranges missing)",
                        r.start,
                        r.end - 1,
                        missing.len(),
                        group.len()
                    ),
                ));
            }
            self.inner.disable_multi_range(
                &self.display,
                "a single-part 206 that does not cover every range",
            );
            let rest: Vec<Range<u64>> = missing.iter().map(|&i| group[i].clone()).collect();
            for (i, b) in missing
                .into_iter()
                .zip(self.fetch_singles(&rest, budget).await?)
            {
                out[i] = b;
            }
        }
        Ok(out)
    }

    /// One buffer per merged range (all non-empty): multi-range groups when the origin
    /// supports them, else single-range requests; concurrent under the limit either way.
    async fn fetch_merged(&self, merged: &[Range<u64>], budget: &Budget) -> Result<Vec<Bytes>> {
        let Some(per_request) = self.inner.multi_range_limit() else {
            return self.fetch_singles(merged, budget).await;
        };
        if merged.len() <= 1 {
            return self.fetch_singles(merged, budget).await;
        }
        let limit = self.inner.options().max_concurrency();
        let mut out: Vec<(usize, Vec<Bytes>)> =
            stream::iter(merged.chunks(per_request).map(<[_]>::to_vec).enumerate())
                .map(|(i, group)| async move {
                    Ok::<_, Error>((i, self.fetch_group(&group, budget).await?))
                })
                .buffer_unordered(limit)
                .try_collect()
                .await?;
        out.sort_by_key(|(i, _)| *i);
        Ok(out.into_iter().flat_map(|(_, b)| b).collect())
    }

    /// The size (one HEAD, cached) within `budget`.
    async fn size_within(&self, budget: &Budget) -> Result<u64> {
        if let Some(s) = self.known_size() {
            return Ok(s);
        }
        let call = Call {
            reader_stats: &self.stats,
            location: &self.display,
            range: None,
            accept: None,
            if_match: self.pin.get(),
            limits: BodyLimits {
                partial: 0,
                full: None,
                unsized_full: false,
                offset: 0,
            },
            budget,
        };
        let f = self.inner.send(Method::HEAD, &self.uri, call).await?;
        if f.status == StatusCode::PRECONDITION_FAILED && self.pin.get().is_some() {
            return Err(self.pin.refused(&self.display));
        }
        if f.status != StatusCode::OK {
            return Err(self.inner.status_error(&self.display, &f, "HEAD"));
        }
        self.observe_etag(&f)?;
        let len = super::content_length(&f.headers).ok_or_else(|| {
            Inner::protocol_error(
                &self.display,
                "HEAD answered without a Content-Length; the origin must report sizes".into(),
            )
        })?;
        Ok(*self.size.get_or_init(|| len))
    }
}

#[async_trait]
impl AsyncReader for HttpReader {
    fn location(&self) -> &str {
        &self.display
    }

    async fn size(&self) -> Result<u64> {
        self.check_open()?;
        self.size_within(&self.inner.budget()).await
    }

    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.check_open()?;
        if let Some(size) = self.known_size() {
            check_range(&self.display, offset, len, size)?;
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        self.fetch_range(offset, len, &self.inner.budget()).await
    }

    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check_open()?;
        if let Some(size) = self.known_size() {
            for r in ranges {
                check_range(&self.display, r.start, r.end.saturating_sub(r.start), size)?;
            }
        }
        let plan: Vec<MergedRange> = coalesce::plan(ranges, self.inner.options().coalesce());
        let (empty, fetched): (Vec<&MergedRange>, Vec<&MergedRange>) =
            plan.iter().partition(|m| m.range.is_empty());
        let want: Vec<Range<u64>> = fetched.iter().map(|m| m.range.clone()).collect();
        let bufs = self.fetch_merged(&want, &self.inner.budget()).await?;
        let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
        for (m, buf) in fetched.into_iter().zip(&bufs) {
            coalesce::split(m, buf, ranges, &mut out);
        }
        for m in empty {
            for &i in &m.members {
                out[i] = Some(Bytes::new());
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    async fn read_tail(&self, len: u64) -> Result<Tail> {
        self.check_open()?;
        let budget = self.inner.budget();
        if len == 0 {
            let size = self.size_within(&budget).await?;
            return Ok(Tail {
                size,
                bytes: Bytes::new(),
            });
        }
        let len = len.min(MAX_SUFFIX);
        let limits = BodyLimits {
            partial: to_usize(&self.display, len)?,
            full: Some(len),
            unsized_full: false,
            offset: self.known_size().map_or(0, |s| s.saturating_sub(len)),
        };
        let f = self.get(&format!("bytes=-{len}"), limits, &budget).await?;
        match f.status {
            StatusCode::PARTIAL_CONTENT => {
                let cr = self.content_range(&f)?;
                let (Some(range), Some(total)) = (cr.range, cr.total) else {
                    return Err(Inner::protocol_error(
                        &self.display,
                        "a suffix GET was answered without the total size in Content-Range".into(),
                    ));
                };
                let expected = len.min(total);
                if range.end != total || range.end - range.start != expected {
                    return Err(Inner::protocol_error(
                        &self.display,
                        format!(
                            "asked for the last {len} bytes but Content-Range says {}-{}/{total}",
                            range.start,
                            range.end - 1
                        ),
                    ));
                }
                if let Some(e) =
                    wrong_len(&self.display, range.start, expected, f.body.len() as u64)
                {
                    return Err(e);
                }
                self.learn_size(Some(total));
                Ok(Tail {
                    size: total,
                    bytes: f.body,
                })
            }
            // A whole body no larger than the tail asked for is the tail (documented).
            StatusCode::OK
                if super::content_length(&f.headers)
                    .is_some_and(|cl| cl <= len && cl == f.body.len() as u64) =>
            {
                let size = f.body.len() as u64;
                self.learn_size(Some(size));
                Ok(Tail {
                    size,
                    bytes: f.body,
                })
            }
            StatusCode::OK => Err(Inner::protocol_error(
                &self.display,
                "origin ignored the Range header (HTTP 200 to a ranged GET)".into(),
            )),
            StatusCode::RANGE_NOT_SATISFIABLE => {
                let total = header_str(&f.headers, &header::CONTENT_RANGE)
                    .and_then(multipart::parse_content_range)
                    .and_then(|c| c.total);
                if total == Some(0) {
                    // An empty object has no satisfiable suffix.
                    self.learn_size(Some(0));
                    Ok(Tail {
                        size: 0,
                        bytes: Bytes::new(),
                    })
                } else {
                    Err(self.out_of_range(&f, &[]))
                }
            }
            _ => Err(self.inner.status_error(&self.display, &f, "GET")),
        }
    }

    async fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    fn close_sync(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
