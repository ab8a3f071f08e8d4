//! Splitting the client's byte stream into HTTP/1.x requests (heads and bodies), so a fault
//! can be chosen per request. Responses are never parsed beyond the end of their head.

/// Largest request head accepted; a longer one turns the connection into a raw relay.
const MAX_HEAD: usize = 64 * 1024;
/// Most headers parsed in one head.
const MAX_HEADERS: usize = 64;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// Bytes of the head, final empty line included.
    pub(crate) len: usize,
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) range: Option<String>,
    body: Body,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked,
}

/// What the front of the buffer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not enough bytes to say; read more.
    More,
    /// A request head of `Head::len` bytes.
    Head(Head),
    /// This many bytes of the current request's body (chunk framing included).
    Body(usize),
    /// The current request is complete (nothing consumed).
    End,
    /// Not HTTP/1.x (or a head too large): relay the rest of the connection raw.
    Raw,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkCrlf,
    Trailer,
    Done,
    Raw,
}

/// The request framer of one connection.
#[derive(Debug)]
pub(crate) struct Framer {
    state: State,
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

impl Framer {
    pub(crate) fn new() -> Self {
        Framer { state: State::Head }
    }

    /// Looks at the front of `buf` and says what it is. The caller consumes the bytes of a
    /// `Head` or `Body` step before calling again; `End` and `More` consume nothing.
    pub(crate) fn step(&mut self, buf: &[u8]) -> Step {
        match self.state {
            State::Raw => Step::Raw,
            State::Done => {
                self.state = State::Head;
                Step::End
            }
            State::Head => self.head(buf),
            State::Length(0) => {
                self.state = State::Done;
                self.step(buf)
            }
            State::Length(left) => {
                if buf.is_empty() {
                    return Step::More;
                }
                let n = take(left, buf.len());
                self.state = State::Length(left - n as u64);
                Step::Body(n)
            }
            State::ChunkSize => match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete((used, 0))) => {
                    self.state = State::Trailer;
                    Step::Body(used)
                }
                Ok(httparse::Status::Complete((used, size))) => {
                    self.state = State::ChunkData(size);
                    Step::Body(used)
                }
                Ok(httparse::Status::Partial) => Step::More,
                Err(_) => self.raw(),
            },
            State::ChunkData(0) => {
                self.state = State::ChunkCrlf;
                self.step(buf)
            }
            State::ChunkData(left) => {
                if buf.is_empty() {
                    return Step::More;
                }
                let n = take(left, buf.len());
                self.state = State::ChunkData(left - n as u64);
                Step::Body(n)
            }
            State::ChunkCrlf => {
                if buf.len() < 2 {
                    Step::More
                } else if &buf[..2] == b"\r\n" {
                    self.state = State::ChunkSize;
                    Step::Body(2)
                } else {
                    self.raw()
                }
            }
            State::Trailer => match find_crlf(buf) {
                // An empty line ends the trailer section (and the request).
                Some(0) => {
                    self.state = State::Done;
                    Step::Body(2)
                }
                Some(i) => Step::Body(i + 2),
                None => Step::More,
            },
        }
    }

    fn raw(&mut self) -> Step {
        self.state = State::Raw;
        Step::Raw
    }

    fn head(&mut self, buf: &[u8]) -> Step {
        if buf.is_empty() {
            return Step::More;
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Step::More,
            _ => return self.raw(),
        };
        let find = |name: &str| {
            req.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .map(|v| v.trim().to_owned())
        };
        let chunked =
            find("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let body = if chunked {
            Body::Chunked
        } else {
            match find("content-length").map(|v| v.parse::<u64>()) {
                Some(Ok(n)) => Body::Length(n),
                Some(Err(_)) => return self.raw(),
                None => Body::Length(0),
            }
        };
        let range = find("range");
        let head = Head {
            len,
            method: req.method.unwrap_or_default().to_owned(),
            target: req.path.unwrap_or_default().to_owned(),
            range,
            body,
        };
        self.state = match head.body {
            Body::Length(n) => State::Length(n),
            Body::Chunked => State::ChunkSize,
        };
        Step::Head(head)
    }
}

fn take(left: u64, available: usize) -> usize {
    usize::try_from(left).map_or(available, |l| l.min(available))
}

/// Finds the end of a response head in a stream: feed it bytes, it says how many of them
/// still belong to the head.
#[derive(Debug, Default)]
pub(crate) struct HeadEnd {
    /// The last bytes seen (up to 3), to find a `\r\n\r\n` split across reads.
    tail: Vec<u8>,
    done: bool,
}

impl HeadEnd {
    /// Of `bytes`, how many belong to the head (all of them while its end is not seen).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> usize {
        if self.done {
            return 0;
        }
        let mut window = std::mem::take(&mut self.tail);
        let carried = window.len();
        window.extend_from_slice(bytes);
        if let Some(i) = window.windows(4).position(|w| w == b"\r\n\r\n") {
            self.done = true;
            return i + 4 - carried;
        }
        let keep = window.len().min(3);
        self.tail = window[window.len() - keep..].to_vec();
        bytes.len()
    }

    /// Whether the end of the head was seen.
    pub(crate) fn done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `piece` bytes; returns the steps with consumed lengths.
    fn frame(input: &[u8], piece: usize) -> Vec<Step> {
        let mut f = Framer::new();
        let mut buf = Vec::new();
        let mut steps = Vec::new();
        let mut fed = 0;
        loop {
            match f.step(&buf) {
                Step::More => {
                    if fed == input.len() {
                        return steps;
                    }
                    let n = piece.min(input.len() - fed);
                    buf.extend_from_slice(&input[fed..fed + n]);
                    fed += n;
                }
                Step::Head(h) => {
                    buf.drain(..h.len);
                    steps.push(Step::Head(h));
                }
                Step::Body(n) => {
                    buf.drain(..n);
                    steps.push(Step::Body(n));
                }
                Step::End => steps.push(Step::End),
                Step::Raw => {
                    steps.push(Step::Raw);
                    return steps;
                }
            }
        }
    }

    fn heads(steps: &[Step]) -> Vec<(String, String)> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Head(h) => Some((h.method.clone(), h.target.clone())),
                _ => None,
            })
            .collect()
    }

    fn body_bytes(steps: &[Step]) -> usize {
        steps
            .iter()
            .map(|s| match s {
                Step::Body(n) => *n,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn frames_pipelined_requests_in_any_piece_size() {
        let input = b"GET /a HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n\
                      PUT /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello\
                      HEAD /c HTTP/1.1\r\n\r\n";
        for piece in [1, 2, 7, 1000] {
            let steps = frame(input, piece);
            assert_eq!(
                heads(&steps),
                [("GET", "/a"), ("PUT", "/b"), ("HEAD", "/c")]
                    .map(|(m, t)| (m.to_owned(), t.to_owned())),
                "piece {piece}"
            );
            assert_eq!(body_bytes(&steps), 5, "piece {piece}");
            assert_eq!(steps.iter().filter(|s| **s == Step::End).count(), 3);
            let Step::Head(h) = &steps[0] else { panic!() };
            assert_eq!(h.range.as_deref(), Some("bytes=0-9"));
        }
    }

    #[test]
    fn frames_chunked_bodies_with_trailers() {
        let input = b"POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                      5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n\
                      GET /next HTTP/1.1\r\n\r\n";
        for piece in [1, 3, 1000] {
            let steps = frame(input, piece);
            assert_eq!(heads(&steps).len(), 2, "piece {piece}");
            let chunked_len = b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n".len();
            assert_eq!(body_bytes(&steps), chunked_len, "piece {piece}");
        }
    }

    #[test]
    fn non_http_becomes_raw() {
        assert_eq!(frame(b"\x16\x03\x01 tls hello", 100), [Step::Raw]);
        let bad_len = b"PUT / HTTP/1.1\r\nContent-Length: nope\r\n\r\n";
        assert_eq!(frame(bad_len, 100), [Step::Raw]);
        assert!(frame(b"GET / HTTP/1.1\r\nHost: x\r\n", 100).is_empty());
    }

    #[test]
    fn head_end_is_found_across_reads() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";
        let head_len = resp.len() - 4;
        for piece in [1, 2, 3, 5, 100] {
            let mut h = HeadEnd::default();
            let mut in_head = 0;
            for chunk in resp.chunks(piece) {
                in_head += h.feed(chunk);
            }
            assert!(h.done());
            assert_eq!(in_head, head_len, "piece {piece}");
        }
    }
}
