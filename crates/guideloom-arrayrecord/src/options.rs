//! The writer's options, parsed from and printed as array_record's option string.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// How chunk buffers are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `uncompressed`.
    Uncompressed,
    /// `zstd:L` (level −131072..=22, default 3) with `window_log:W` (10..=31; ArrayRecord's
    /// default 20).
    Zstd {
        /// Compression level.
        level: i32,
        /// Log2 of the window.
        window_log: u32,
    },
    /// `snappy` (raw block format).
    Snappy,
    /// `brotli:L` (level 0..=11, default 6) with `window_log:W` (10..=30, default 22; above
    /// 24 the stream uses Brotli's large-window extension, as Riegeli does).
    Brotli {
        /// Compression level (quality).
        level: u32,
        /// Log2 of the window.
        window_log: u32,
    },
}

/// ArrayRecord's default zstd window: `window_log:20`.
pub const DEFAULT_ZSTD_WINDOW_LOG: u32 = 20;
/// Riegeli's default Brotli window.
pub const DEFAULT_BROTLI_WINDOW_LOG: u32 = 22;

/// Options of [`ArrayRecordWriter`](crate::ArrayRecordWriter), in array_record's option string
/// syntax: comma-separated `key` or `key:value` items.
///
/// | item | meaning | default |
/// |---|---|---|
/// | `group_size:N` | records per chunk (1..=2³¹−1) | 1 |
/// | `uncompressed`, `zstd[:L]`, `snappy`, `brotli[:L]` | compression (at most one) | `zstd:3` |
/// | `window_log:N` or `window_log:auto` | zstd/Brotli window (not with `uncompressed`/`snappy`) | 20 for zstd, 22 for Brotli |
/// | `pad_to_block_boundary[:true\|false]` | pad every chunk to a 64 KiB boundary | false |
/// | `max_parallelism:N`, `saturation_delay_ms:N` | accepted; this writer encodes chunks in order on one thread | |
/// | `transpose[:true\|false]` | transposed chunks: only `false` is supported | false |
///
/// `""` and `"default"` are the defaults, the same as the Python writer's
/// (`group_size:1,zstd:3,window_log:20`). [`Display`](fmt::Display) prints the string that
/// array_record stores in the footer, e.g.
/// `group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1`.
///
/// ```
/// use guideloom_arrayrecord::{Compression, ArrayRecordWriterOptions};
///
/// let o: ArrayRecordWriterOptions = "group_size:64,brotli:9".parse()?;
/// assert_eq!(o.group_size(), 64);
/// assert_eq!(o.compression(), Compression::Brotli { level: 9, window_log: 22 });
/// assert_eq!(
///     ArrayRecordWriterOptions::default().to_string(),
///     "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1"
/// );
/// assert!("zstd,snappy".parse::<ArrayRecordWriterOptions>().is_err());
/// # Ok::<(), guideloom_arrayrecord::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayRecordWriterOptions {
    group_size: u32,
    compression: Compression,
    pad_to_block_boundary: bool,
}

impl Default for ArrayRecordWriterOptions {
    fn default() -> Self {
        ArrayRecordWriterOptions {
            group_size: 1,
            compression: Compression::Zstd {
                level: 3,
                window_log: DEFAULT_ZSTD_WINDOW_LOG,
            },
            pad_to_block_boundary: false,
        }
    }
}

impl ArrayRecordWriterOptions {
    /// Records per chunk.
    pub fn group_size(&self) -> u32 {
        self.group_size
    }

    /// The compression of data chunks and of the footer.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Whether every chunk is followed by padding to a 64 KiB boundary.
    pub fn pad_to_block_boundary(&self) -> bool {
        self.pad_to_block_boundary
    }

    /// Sets the records per chunk (at least 1).
    pub fn with_group_size(mut self, group_size: u32) -> Self {
        self.group_size = group_size.max(1);
        self
    }

    /// Sets the compression.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets block-boundary padding after every chunk.
    pub fn with_pad_to_block_boundary(mut self, pad: bool) -> Self {
        self.pad_to_block_boundary = pad;
        self
    }
}

/// The compression items seen while parsing.
#[derive(Default)]
struct Seen {
    codec: Option<(&'static str, Option<i64>)>,
    window_log: Option<Option<u32>>,
}

impl FromStr for ArrayRecordWriterOptions {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        let fail = |what: String| Error::Options {
            options: text.to_owned(),
            what,
        };
        let mut options = ArrayRecordWriterOptions::default();
        let mut seen = Seen::default();
        let mut keys: Vec<&str> = Vec::new();
        let items: Vec<&str> = if text.trim().is_empty() {
            Vec::new()
        } else {
            text.split(',').map(str::trim).collect()
        };
        for item in &items {
            let (key, value) = match item.split_once(':') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (*item, None),
            };
            if keys.contains(&key) {
                return Err(fail(format!("`{key}` is given more than once")));
            }
            keys.push(key);
            let int = |lo: i64, hi: i64| -> Result<i64, Error> {
                let v = value.ok_or_else(|| fail(format!("`{key}` needs a value")))?;
                v.parse::<i64>()
                    .ok()
                    .filter(|n| (lo..=hi).contains(n))
                    .ok_or_else(|| fail(format!("`{key}:{v}`: expected an integer in {lo}..={hi}")))
            };
            let flag = || -> Result<bool, Error> {
                match value {
                    None | Some("true") => Ok(true),
                    Some("false") => Ok(false),
                    Some(v) => Err(fail(format!("`{key}:{v}`: expected true or false"))),
                }
            };
            match key {
                "default" if items.len() == 1 && value.is_none() => {}
                "default" => return Err(fail("`default` must stand alone".into())),
                "group_size" => {
                    options.group_size = u32::try_from(int(1, i64::from(i32::MAX))?)
                        .map_err(|_| fail("group_size out of range".into()))?;
                }
                "max_parallelism" | "saturation_delay_ms" => {
                    int(1, i64::from(i32::MAX))?;
                }
                "transpose" => {
                    if flag()? {
                        return Err(fail(
                            "transposed chunks (`transpose`) are not supported; \
                             use `transpose:false` or leave it out"
                                .into(),
                        ));
                    }
                }
                "pad_to_block_boundary" => options.pad_to_block_boundary = flag()?,
                "uncompressed" | "snappy" | "zstd" | "brotli" => {
                    if let Some((other, _)) = seen.codec {
                        return Err(fail(format!("`{key}` conflicts with `{other}`")));
                    }
                    let (name, level) = match key {
                        "uncompressed" if value.is_none() => ("uncompressed", None),
                        "uncompressed" => return Err(fail("`uncompressed` takes no value".into())),
                        "snappy" => ("snappy", value.map(|_| int(1, 2)).transpose()?),
                        "zstd" => ("zstd", value.map(|_| int(-131_072, 22)).transpose()?),
                        _ => ("brotli", value.map(|_| int(0, 11)).transpose()?),
                    };
                    seen.codec = Some((name, level));
                }
                "window_log" => {
                    seen.window_log = Some(match value {
                        Some("auto") => None,
                        _ => Some(u32::try_from(int(10, 31)?).unwrap_or(31)),
                    });
                }
                _ => return Err(fail(format!("unknown option `{key}`"))),
            }
        }
        options.compression = match (seen.codec, seen.window_log) {
            (Some(("uncompressed", _)), Some(_)) | (Some(("snappy", _)), Some(_)) => {
                return Err(fail("`window_log` applies only to zstd and brotli".into()));
            }
            (Some(("uncompressed", _)), None) => Compression::Uncompressed,
            (Some(("snappy", _)), None) => Compression::Snappy,
            (Some(("brotli", level)), window) => {
                let window_log = window.flatten().unwrap_or(DEFAULT_BROTLI_WINDOW_LOG);
                if window_log > 30 {
                    return Err(fail("brotli's window_log is at most 30".into()));
                }
                Compression::Brotli {
                    level: level.map_or(6, |l| u32::try_from(l).unwrap_or(6)),
                    window_log,
                }
            }
            (codec, window) => Compression::Zstd {
                level: codec
                    .and_then(|(_, l)| l)
                    .map_or(3, |l| i32::try_from(l).unwrap_or(3)),
                window_log: window.flatten().unwrap_or(DEFAULT_ZSTD_WINDOW_LOG),
            },
        };
        Ok(options)
    }
}

impl fmt::Display for ArrayRecordWriterOptions {
    /// The option string array_record stores in the footer (`ToString()` of its options).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "group_size:{},transpose:false,pad_to_block_boundary:{}",
            self.group_size, self.pad_to_block_boundary
        )?;
        match self.compression {
            Compression::Uncompressed => write!(f, ",uncompressed")?,
            Compression::Snappy => write!(f, ",snappy")?,
            Compression::Zstd { level, window_log } => {
                write!(f, ",zstd:{level},window_log:{window_log}")?;
            }
            Compression::Brotli { level, window_log } => {
                // array_record prints Brotli's window only when one was set.
                write!(f, ",brotli:{level}")?;
                if window_log != DEFAULT_BROTLI_WINDOW_LOG {
                    write!(f, ",window_log:{window_log}")?;
                }
            }
        }
        write!(f, ",max_parallelism:1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ArrayRecordWriterOptions {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_what_array_record_accepts() {
        assert_eq!(parse(""), ArrayRecordWriterOptions::default());
        assert_eq!(parse("default"), ArrayRecordWriterOptions::default());
        let o = parse("group_size:1024,zstd:5,window_log:10");
        assert_eq!(o.group_size(), 1024);
        assert_eq!(
            o.compression(),
            Compression::Zstd {
                level: 5,
                window_log: 10
            }
        );
        assert_eq!(parse("snappy").compression(), Compression::Snappy);
        assert_eq!(
            parse("uncompressed").compression(),
            Compression::Uncompressed
        );
        assert_eq!(
            parse("brotli").compression(),
            Compression::Brotli {
                level: 6,
                window_log: 22
            }
        );
        assert_eq!(
            parse("brotli:11,window_log:30").compression(),
            Compression::Brotli {
                level: 11,
                window_log: 30
            }
        );
        assert!(parse("pad_to_block_boundary:true").pad_to_block_boundary());
        assert!(parse("pad_to_block_boundary").pad_to_block_boundary());
        assert_eq!(
            parse("transpose:false,max_parallelism:4"),
            ArrayRecordWriterOptions::default()
        );
        assert_eq!(
            parse("zstd:3,window_log:auto").compression(),
            ArrayRecordWriterOptions::default().compression()
        );
    }

    #[test]
    fn refuses_what_array_record_refuses() {
        for bad in [
            "group_size:0",
            "group_size:x",
            "group_size",
            "zstd,snappy",
            "snappy,window_log:20",
            "uncompressed,window_log:20",
            "zstd:23",
            "brotli:12",
            "brotli,window_log:31",
            "window_log:9",
            "transpose",
            "transpose:true",
            "group_size:1,group_size:2",
            "default,group_size:2",
            "colour:blue",
            "pad_to_block_boundary:maybe",
        ] {
            let err = bad.parse::<ArrayRecordWriterOptions>().unwrap_err();
            assert!(matches!(err, Error::Options { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn prints_what_array_record_stores() {
        assert_eq!(
            parse("group_size:2,snappy").to_string(),
            "group_size:2,transpose:false,pad_to_block_boundary:false,snappy,max_parallelism:1"
        );
        assert_eq!(
            parse("pad_to_block_boundary:true,uncompressed").to_string(),
            "group_size:1,transpose:false,pad_to_block_boundary:true,uncompressed,max_parallelism:1"
        );
        // Every printed string parses back to the same options.
        for s in [
            "",
            "brotli:3",
            "zstd:-5,window_log:31",
            "group_size:7,uncompressed",
        ] {
            let o = parse(s);
            assert_eq!(parse(&o.to_string()), o);
        }
    }
}
