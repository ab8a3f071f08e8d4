//! `guideloom bench`: random and sequential read throughput through each applicable IO
//! backend, beside the raw ceiling measured in the same run on the same bytes.
//!
//! Local roots: `SeekIo`, `PreadIo`, `MmapIo` (sync shard readers, record CRCs off so the
//! comparison is IO against IO), against raw `pread` of the same record ranges and a plain
//! sequential read of the same files. `s3://` roots: `ObjectStoreIo` against raw
//! object_store ranged GETs of the same ranges and whole-object GETs. Both kinds also get a
//! `dataset (get)` row: the same random records read by global index through the facade's
//! dataset (guideloom-publish's `Dataset`, the path of `guideloom get`), beside the
//! same raw ceiling. Each figure is the median of three rounds.
//!
//! Every timed read, backend and ceiling alike, touches every byte it returns: the bytes are
//! summed ([`touch`]) inside the timed loop, so a zero-copy backend (mmap) is charged for
//! reading the pages, not only for slicing a mapping. The sums are reported beside each row
//! (`checksum`, `ceiling_checksum` in `--json`): equal sums show both sides read the same
//! bytes.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guideloom_format::{AsyncShard, ReadOptions, SyncShard};
use guideloom_io::objstore::ObjectStoreIo;
use guideloom_io::{Backend, MmapIo, PreadIo, SeekIo, SyncReader};
use guideloom_publish::{Registry, RootUri, Snapshot};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::cli::{BenchArgs, Global};
use crate::error::{CliError, Result};
use crate::output;
use crate::root::{self, OpenRoot};

const ROUNDS: usize = 3;

/// Reads every byte of `bytes` and returns their sum (wrapping; order-independent, so random
/// reads of the same ranges in any order sum alike). `black_box` keeps the compiler from
/// skipping the loop when the sum is unused.
fn touch(bytes: &[u8]) -> u64 {
    let sum = std::hint::black_box(bytes)
        .iter()
        .fold(0u64, |acc, &b| acc.wrapping_add(u64::from(b)));
    std::hint::black_box(sum)
}

/// [`touch`] over several buffers.
fn touch_all<B: AsRef<[u8]>>(buffers: &[B]) -> u64 {
    buffers
        .iter()
        .fold(0u64, |acc, b| acc.wrapping_add(touch(b.as_ref())))
}

/// Opens a sync reader of a local file through one backend.
type OpenFn = Box<dyn Fn(&PathBuf) -> guideloom_io::Result<Box<dyn SyncReader>>>;

/// One row of the table.
#[derive(Debug)]
struct Row {
    backend: String,
    pattern: &'static str,
    bytes: u64,
    records: u64,
    took: Duration,
    ceiling: &'static str,
    ceiling_took: Duration,
    /// Sum of every byte the backend read (see [`touch`]).
    checksum: u64,
    /// Sum of every byte the ceiling read.
    ceiling_checksum: u64,
}

impl Row {
    fn mib_s(bytes: u64, took: Duration) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let b = bytes as f64;
        b / (1024.0 * 1024.0) / took.as_secs_f64().max(1e-9)
    }
    fn throughput(&self) -> f64 {
        Self::mib_s(self.bytes, self.took)
    }
    fn ceiling_throughput(&self) -> f64 {
        Self::mib_s(self.bytes, self.ceiling_took)
    }
    fn records_s(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let r = self.records as f64;
        r / self.took.as_secs_f64().max(1e-9)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The records to read at random: `(shard number, record in shard)`.
fn picks(snapshot: &Snapshot, reads: u64, seed: u64) -> Vec<(usize, u64)> {
    let nonempty: Vec<(usize, u64)> = snapshot
        .shards()
        .iter()
        .enumerate()
        .filter(|(_, s)| s.record_count > 0)
        .map(|(n, s)| (n, s.record_count))
        .collect();
    let total: u64 = nonempty.iter().map(|(_, c)| c).sum();
    let mut rng = StdRng::seed_from_u64(seed);
    (0..reads)
        .map(|_| {
            let mut i = rng.random_range(0..total);
            for (n, c) in &nonempty {
                if i < *c {
                    return (*n, i);
                }
                i -= c;
            }
            unreachable!("index below the total")
        })
        .collect()
}

fn local_rows(
    dir: &std::path::Path,
    snapshot: &Snapshot,
    picks: &[(usize, u64)],
) -> Result<Vec<Row>> {
    let paths: Vec<PathBuf> = snapshot.shards().iter().map(|s| dir.join(&s.key)).collect();
    let options = ReadOptions::default().with_verify_records(false);
    let backends: Vec<(&str, OpenFn)> = vec![
        ("seek", Box::new(|p| SeekIo::new().open(p))),
        ("pread", Box::new(|p| PreadIo::new().open(p))),
        ("mmap", Box::new(|p| MmapIo::new().open(p))),
    ];
    let open_all = |open: &dyn Fn(&PathBuf) -> guideloom_io::Result<Box<dyn SyncReader>>| -> Result<Vec<SyncShard>> {
        paths
            .iter()
            .zip(snapshot.shards())
            .map(|(p, r)| {
                let reader = open(p).map_err(|e| CliError::io(r.key.clone(), e))?;
                SyncShard::open(reader, &options).map_err(|e| CliError::shard("ROOT", &r.key, e))
            })
            .collect()
    };
    // Ranges of the picked records, and the raw files for the ceilings.
    let reference = open_all(&|p| PreadIo::new().open(p))?;
    let ranges: Vec<(usize, std::ops::Range<u64>)> = picks
        .iter()
        .map(|(n, i)| {
            reference[*n]
                .record_range(*i)
                .map(|r| (*n, r))
                .map_err(|e| CliError::shard("ROOT", &snapshot.shards()[*n].key, e))
        })
        .collect::<Result<_>>()?;
    let random_bytes: u64 = ranges.iter().map(|(_, r)| r.end - r.start).sum();
    let data_bytes: u64 = reference.iter().map(SyncShard::data_len).sum();
    let files: Vec<std::fs::File> = paths
        .iter()
        .map(|p| std::fs::File::open(p).map_err(|e| CliError::file(p, e)))
        .collect::<Result<_>>()?;
    let raw_random = || -> Result<(Duration, u64)> {
        let mut buf = Vec::new();
        let mut sum = 0u64;
        let t = Instant::now();
        for (n, r) in &ranges {
            buf.resize(usize::try_from(r.end - r.start).unwrap_or(0), 0);
            files[*n]
                .read_exact_at(&mut buf, r.start)
                .map_err(|e| CliError::file(&paths[*n], e))?;
            sum = sum.wrapping_add(touch(&buf));
        }
        Ok((t.elapsed(), sum))
    };
    // The data region of each file (records back to back after the header): what the
    // sequential backends return, so both sides touch the same bytes.
    let data: Vec<std::ops::Range<usize>> = reference
        .iter()
        .map(|s| {
            let start = usize::try_from(guideloom_format::spec::HEADER_LEN).unwrap_or(0);
            start..start + usize::try_from(s.data_len()).unwrap_or(0)
        })
        .collect();
    let raw_sequential = || -> Result<(Duration, u64)> {
        let mut sum = 0u64;
        let t = Instant::now();
        for (p, d) in paths.iter().zip(&data) {
            let bytes = std::fs::read(p).map_err(|e| CliError::file(p, e))?;
            sum = sum.wrapping_add(touch(bytes.get(d.clone()).unwrap_or_default()));
        }
        Ok((t.elapsed(), sum))
    };
    let mut rows = Vec::new();
    for (name, open) in &backends {
        let shards = open_all(open.as_ref())?;
        let (mut rand_t, mut ceil_t, mut seq_t, mut seq_ceil_t) = (vec![], vec![], vec![], vec![]);
        let mut sums = [0u64; 4];
        for _ in 0..ROUNDS {
            let (took, sum) = raw_random()?;
            ceil_t.push(took);
            sums[1] = sum;
            let mut sum = 0u64;
            let t = Instant::now();
            for (n, i) in picks {
                let bytes = shards[*n]
                    .read(*i)
                    .map_err(|e| CliError::shard("ROOT", &snapshot.shards()[*n].key, e))?;
                sum = sum.wrapping_add(touch(&bytes));
            }
            rand_t.push(t.elapsed());
            sums[0] = sum;
            let (took, sum) = raw_sequential()?;
            seq_ceil_t.push(took);
            sums[3] = sum;
            let mut sum = 0u64;
            let t = Instant::now();
            for (n, s) in shards.iter().enumerate() {
                let records = s
                    .read_run(0, s.len())
                    .map_err(|e| CliError::shard("ROOT", &snapshot.shards()[n].key, e))?;
                sum = sum.wrapping_add(touch_all(&records));
            }
            seq_t.push(t.elapsed());
            sums[2] = sum;
        }
        rows.push(Row {
            backend: (*name).to_owned(),
            pattern: "random",
            bytes: random_bytes,
            records: picks.len() as u64,
            took: median(rand_t),
            ceiling: "raw pread",
            ceiling_took: median(ceil_t),
            checksum: sums[0],
            ceiling_checksum: sums[1],
        });
        rows.push(Row {
            backend: (*name).to_owned(),
            pattern: "sequential",
            bytes: data_bytes,
            records: snapshot.total_records(),
            took: median(seq_t),
            ceiling: "sequential file read",
            ceiling_took: median(seq_ceil_t),
            checksum: sums[2],
            ceiling_checksum: sums[3],
        });
    }
    Ok(rows)
}

async fn s3_rows(
    root: &OpenRoot,
    bucket: &str,
    prefix: &str,
    snapshot: &Snapshot,
    picks: &[(usize, u64)],
) -> Result<Vec<Row>> {
    let handle = Registry::global().lookup("s3", bucket).ok_or_else(|| {
        CliError::argument(&root.name, "no S3 store was configured for this bucket")
    })?;
    let store: Arc<dyn ObjectStore> = Arc::clone(handle.store());
    let path = |key: &str| {
        if prefix.is_empty() {
            StorePath::from(key)
        } else {
            StorePath::from(format!("{}/{key}", prefix.trim_end_matches('/')))
        }
    };
    let io = ObjectStoreIo::new(Arc::clone(&store));
    let options = ReadOptions::default().with_verify_records(false);
    let mut shards = Vec::new();
    for r in snapshot.shards() {
        let reader = io
            .open_async(&path(&r.key))
            .await
            .map_err(|e| CliError::io(r.key.clone(), e))?;
        shards.push(
            AsyncShard::open(reader, &options)
                .await
                .map_err(|e| CliError::shard(&root.name, &r.key, e))?,
        );
    }
    let mut ranges = Vec::new();
    for (n, i) in picks {
        let r = shards[*n]
            .record_range(*i)
            .map_err(|e| CliError::shard(&root.name, &snapshot.shards()[*n].key, e))?;
        ranges.push((*n, r));
    }
    let random_bytes: u64 = ranges.iter().map(|(_, r)| r.end - r.start).sum();
    let data_bytes: u64 = shards.iter().map(AsyncShard::data_len).sum();
    let fail = |key: &str, e: object_store::Error| {
        CliError::argument(format!("{}: {key}", root.name), e.to_string())
    };
    let (mut rand_t, mut ceil_t, mut seq_t, mut seq_ceil_t) = (vec![], vec![], vec![], vec![]);
    let mut sums = [0u64; 4];
    let header = usize::try_from(guideloom_format::spec::HEADER_LEN).unwrap_or(0);
    for _ in 0..ROUNDS {
        let mut sum = 0u64;
        let t = Instant::now();
        for (n, r) in &ranges {
            let key = &snapshot.shards()[*n].key;
            let bytes = store
                .get_range(&path(key), r.clone())
                .await
                .map_err(|e| fail(key, e))?;
            sum = sum.wrapping_add(touch(&bytes));
        }
        ceil_t.push(t.elapsed());
        sums[1] = sum;
        let mut sum = 0u64;
        let t = Instant::now();
        for (n, i) in picks {
            let bytes = shards[*n]
                .read(*i)
                .await
                .map_err(|e| CliError::shard(&root.name, &snapshot.shards()[*n].key, e))?;
            sum = sum.wrapping_add(touch(&bytes));
        }
        rand_t.push(t.elapsed());
        sums[0] = sum;
        let mut sum = 0u64;
        let t = Instant::now();
        for (r, s) in snapshot.shards().iter().zip(&shards) {
            let bytes = store
                .get(&path(&r.key))
                .await
                .map_err(|e| fail(&r.key, e))?
                .bytes()
                .await
                .map_err(|e| fail(&r.key, e))?;
            let data = header..header + usize::try_from(s.data_len()).unwrap_or(0);
            sum = sum.wrapping_add(touch(bytes.get(data).unwrap_or_default()));
        }
        seq_ceil_t.push(t.elapsed());
        sums[3] = sum;
        let mut sum = 0u64;
        let t = Instant::now();
        for (n, s) in shards.iter().enumerate() {
            let records = s
                .read_run(0, s.len())
                .await
                .map_err(|e| CliError::shard(&root.name, &snapshot.shards()[n].key, e))?;
            sum = sum.wrapping_add(touch_all(&records));
        }
        seq_t.push(t.elapsed());
        sums[2] = sum;
    }
    Ok(vec![
        Row {
            backend: "object_store".into(),
            pattern: "random",
            bytes: random_bytes,
            records: picks.len() as u64,
            took: median(rand_t),
            ceiling: "raw ranged GET",
            ceiling_took: median(ceil_t),
            checksum: sums[0],
            ceiling_checksum: sums[1],
        },
        Row {
            backend: "object_store".into(),
            pattern: "sequential",
            bytes: data_bytes,
            records: snapshot.total_records(),
            took: median(seq_t),
            ceiling: "whole-object GET",
            ceiling_took: median(seq_ceil_t),
            checksum: sums[2],
            ceiling_checksum: sums[3],
        },
    ])
}

/// Random reads of `picks` by global index through the facade's dataset (shards opened
/// before timing, record CRCs off), beside `random`'s raw ceiling.
async fn dataset_row(
    root: &OpenRoot,
    snapshot: &Snapshot,
    picks: &[(usize, u64)],
    random: &Row,
) -> Result<Row> {
    let dataset = root.root.reader_with(
        snapshot.clone(),
        ReadOptions::default().with_verify_records(false),
    );
    let starts = dataset.table().starts();
    let indices: Vec<u64> = picks.iter().map(|(n, i)| starts[*n] + i).collect();
    for n in 0..snapshot.shards().len() {
        dataset.open_shard_async(n).await.map_err(|e| root.err(e))?;
    }
    let mut took = Vec::with_capacity(ROUNDS);
    let mut checksum = 0u64;
    for _ in 0..ROUNDS {
        let mut sum = 0u64;
        let t = Instant::now();
        for ((n, _), &i) in picks.iter().zip(&indices) {
            let bytes = dataset
                .get_async(i)
                .await
                .map_err(|e| root.dataset_err(&snapshot.shards()[*n].key, e))?;
            sum = sum.wrapping_add(touch(&bytes));
        }
        took.push(t.elapsed());
        checksum = sum;
    }
    Ok(Row {
        backend: "dataset (get)".into(),
        pattern: "random",
        bytes: random.bytes,
        records: random.records,
        took: median(took),
        ceiling: random.ceiling,
        ceiling_took: random.ceiling_took,
        checksum,
        ceiling_checksum: random.ceiling_checksum,
    })
}

/// Runs `guideloom bench`.
pub(crate) async fn run(args: BenchArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    if snapshot.total_records() == 0 {
        return Err(CliError::argument(
            &root.name,
            format!("snapshot {} has no records to read", snapshot.id()),
        ));
    }
    let picks = picks(&snapshot, args.reads, args.seed);
    let mut rows = match &root.uri {
        RootUri::Local(dir) => {
            let dir = dir.clone();
            let snap = snapshot.clone();
            let local_picks = picks.clone();
            tokio::task::spawn_blocking(move || local_rows(&dir, &snap, &local_picks))
                .await
                .map_err(|e| {
                    CliError::argument("bench", format!("benchmark thread failed: {e}"))
                })??
        }
        RootUri::Bucket {
            scheme,
            bucket,
            prefix,
        } if scheme == "s3" => s3_rows(&root, bucket, prefix, &snapshot, &picks).await?,
        _ => {
            return Err(CliError::argument(
                &root.name,
                "bench measures local directories and s3:// roots",
            ));
        }
    };
    if let Some(random) = rows.iter().find(|r| r.pattern == "random") {
        let row = dataset_row(&root, &snapshot, &picks, random).await?;
        rows.push(row);
    }
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "snapshot_id": snapshot.id(),
            "rounds": ROUNDS,
            "bytes_touched": true,
            "rows": rows.iter().map(|r| json!({
                "backend": r.backend,
                "pattern": r.pattern,
                "records": r.records,
                "bytes": r.bytes,
                "seconds": r.took.as_secs_f64(),
                "mib_per_s": r.throughput(),
                "records_per_s": r.records_s(),
                "ceiling": r.ceiling,
                "ceiling_seconds": r.ceiling_took.as_secs_f64(),
                "ceiling_mib_per_s": r.ceiling_throughput(),
                "ratio": r.ceiling_took.as_secs_f64() / r.took.as_secs_f64().max(1e-9),
                "checksum": r.checksum,
                "ceiling_checksum": r.ceiling_checksum,
            })).collect::<Vec<_>>(),
        }));
    }
    output::line(&format!(
        "{} snapshot {}: {} records, {} random reads (seed {}), median of {ROUNDS} rounds, record CRCs off, every byte read is summed",
        root.name,
        snapshot.id(),
        snapshot.total_records(),
        args.reads,
        args.seed
    ))?;
    output::line(&format!(
        "{:<13} {:<11} {:>12} {:>13} {:>16} {:>22} {:>7}",
        "backend", "pattern", "MiB/s", "records/s", "ceiling MiB/s", "ceiling", "ratio"
    ))?;
    for r in &rows {
        output::line(&format!(
            "{:<13} {:<11} {:>12.2} {:>13.0} {:>16.2} {:>22} {:>6.0}%",
            r.backend,
            r.pattern,
            r.throughput(),
            r.records_s(),
            r.ceiling_throughput(),
            r.ceiling,
            100.0 * r.ceiling_took.as_secs_f64() / r.took.as_secs_f64().max(1e-9)
        ))?;
    }
    Ok(())
}
