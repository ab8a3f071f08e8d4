//! Helper process of `tests/tests/it/publish_spool.rs`: writes one shard of `<MiB>` MiB
//! (records of 64 KiB, slices of one pseudo-random pool, so producing them costs nothing)
//! with `Root::write_shard` into a fresh root, spooling in `<spool-dir>`, and prints one line:
//! `SPOOL-RESULT created size=<bytes> head=<bytes> puts=<n> rss_anon_peak_kib=<k>
//! vm_hwm_kib=<k>` or `SPOOL-RESULT error kind=<disk_full|io|too_large|other> dir=<dir>
//! puts=<n> error=<text>`. `puts` counts the root's create-only puts (a `CountingStore`).
//!
//! Usage: `spool_writer <moto|rgw|memory|local> <spool-dir> <MiB> [--data-limit-mib N]
//! [--pause-after-mib M] [--max-shard-mib L]`.
//! - `--data-limit-mib N` sets `RLIMIT_DATA` (private writable memory: the heap, anonymous
//!   mappings, thread stacks; not a shared mapping of a file) to N MiB before anything else,
//!   so a writer that holds the shard on the heap aborts on its allocation failure.
//! - `--pause-after-mib M`: once M MiB of records were handed to the writer, print
//!   `SPOOL-PAUSED` and wait for stdin to close (the parent kills the process meanwhile).
//! - `--max-shard-mib L` sets `max_encoded_shard_bytes` to L MiB.
//!
//! `local` is a local root in the spool directory itself. On moto or RGW the root is under a unique prefix of the test bucket, and the shard is
//! deleted again after its HEAD. Exits 2 on bad arguments, 1 if the server is missing.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use guideloom_format::ShardMetadata;
use guideloom_publish::{
    CountingStore, Error, ObjectStoreBucket, Registry, Root, RootOptions, RootStore,
    StagingOptions, StoreOptions,
};
use object_store::ObjectStoreExt;

const RECORD: usize = 64 << 10;
const POOL: usize = 1 << 20;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn pool() -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..POOL + RECORD)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

struct Args {
    kind: String,
    spool: PathBuf,
    mib: usize,
    data_limit_mib: Option<u64>,
    pause_after_mib: Option<usize>,
    max_shard_mib: Option<u64>,
}

fn parse() -> Option<Args> {
    let mut it = std::env::args().skip(1);
    let kind = it.next()?;
    let spool = PathBuf::from(it.next()?);
    let mib = it.next()?.parse().ok()?;
    let mut args = Args {
        kind,
        spool,
        mib,
        data_limit_mib: None,
        pause_after_mib: None,
        max_shard_mib: None,
    };
    while let Some(flag) = it.next() {
        let value = it.next()?;
        match flag.as_str() {
            "--data-limit-mib" => args.data_limit_mib = Some(value.parse().ok()?),
            "--pause-after-mib" => args.pause_after_mib = Some(value.parse().ok()?),
            "--max-shard-mib" => args.max_shard_mib = Some(value.parse().ok()?),
            _ => return None,
        }
    }
    Some(args)
}

/// The store of the root, and for S3 servers the raw store and the key prefix (to clean up).
type Opened = (
    Arc<dyn RootStore>,
    Option<(Arc<dyn object_store::ObjectStore>, String)>,
);

fn open(kind: &str, spool: &std::path::Path) -> Option<Opened> {
    let prefix = guideloom_tests::unique("spool");
    let server = match kind {
        // A local root in the spool directory itself (it writes its own temporary files).
        "local" => {
            let store = Registry::new()
                .resolve(spool.to_str()?, &StoreOptions::default())
                .ok()?;
            return Some((store, None));
        }
        "memory" => {
            let store = Registry::new()
                .resolve(&format!("memory://{prefix}"), &StoreOptions::default())
                .ok()?;
            return Some((store, None));
        }
        "moto" => guideloom_tests::moto("spool_writer")?,
        "rgw" => guideloom_tests::rgw("spool_writer")?,
        _ => return None,
    };
    let bucket = ObjectStoreBucket::new(
        Arc::clone(&server.store),
        format!("s3://{} at {}", server.bucket, server.endpoint),
    );
    let root = bucket.root(&prefix).ok()?;
    Some((Arc::new(root), Some((server.store, prefix))))
}

fn kind_of(e: &Error) -> &'static str {
    match e {
        Error::DiskFull { .. } => "disk_full",
        Error::Io { .. } => "io",
        Error::ShardTooLarge { .. } => "too_large",
        _ => "other",
    }
}

fn main() -> ExitCode {
    let Some(args) = parse() else {
        eprintln!(
            "usage: spool_writer <moto|rgw|memory|local> <spool-dir> <MiB> [--data-limit-mib N] \
             [--pause-after-mib M] [--max-shard-mib L]"
        );
        return ExitCode::from(2);
    };
    if let Some(mib) = args.data_limit_mib {
        let bytes = mib << 20;
        let limit = nix::sys::resource::Resource::RLIMIT_DATA;
        if let Err(e) = nix::sys::resource::setrlimit(limit, bytes, bytes) {
            eprintln!("spool_writer: setrlimit(RLIMIT_DATA): {e}");
            return ExitCode::FAILURE;
        }
    }
    let Some((store, server)) = open(&args.kind, &args.spool) else {
        eprintln!("spool_writer: no {} root here", args.kind);
        return ExitCode::FAILURE;
    };
    let counting = CountingStore::new(store);
    let mut options = RootOptions {
        staging: StagingOptions {
            dir: Some(args.spool.clone()),
            ..StagingOptions::default()
        },
        ..RootOptions::default()
    };
    if let Some(mib) = args.max_shard_mib {
        options.max_encoded_shard_bytes = mib << 20;
    }
    let root = Root::new(Arc::new(counting.clone()), options);

    // The peak of anonymous resident memory, sampled every millisecond.
    let peak = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (Arc::clone(&peak), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(status_kib("RssAnon:"), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };

    let pool = pool();
    let count = args.mib * ((1 << 20) / RECORD);
    let pause_at = args.pause_after_mib.map(|m| m * ((1 << 20) / RECORD));
    let records = (0..count).map(|i| {
        if Some(i) == pause_at {
            println!("SPOOL-PAUSED");
            let _ = std::io::stdout().flush();
            // Until the parent kills this process (or closes stdin).
            for _ in std::io::stdin().lock().lines() {}
        }
        let start = (i * 4_099) % POOL;
        &pool[start..start + RECORD]
    });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("spool_writer: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let written = runtime.block_on(async {
        let shard = root
            .write_shard("w", 0, ShardMetadata::new("raw", "documents"), records)
            .await?;
        let head = root.store().head(&shard.key).await?.size;
        Ok::<_, Error>((shard, head))
    });
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let puts = counting.counts().put_create.requests;
    let line = match &written {
        Ok((shard, head)) => format!(
            "SPOOL-RESULT created size={} head={head} puts={puts} rss_anon_peak_kib={} \
             vm_hwm_kib={}",
            shard.size,
            peak.load(Ordering::Relaxed),
            status_kib("VmHWM:")
        ),
        Err(e) => {
            let peak = peak.load(Ordering::Relaxed);
            let dir = match e {
                Error::DiskFull { dir, .. } | Error::Io { path: dir, .. } => {
                    dir.display().to_string()
                }
                _ => String::new(),
            };
            format!(
                "SPOOL-RESULT error kind={} dir={dir} puts={puts} rss_anon_peak_kib={peak} \
                 error={e}",
                kind_of(e)
            )
        }
    };
    println!("{line}");
    if let (Ok((shard, _)), Some((raw, prefix))) = (&written, server) {
        let path = object_store::path::Path::from(format!("{prefix}/{}", shard.key));
        if let Err(e) = runtime.block_on(raw.delete(&path)) {
            eprintln!("spool_writer: could not delete {path}: {e}");
        }
    }
    ExitCode::SUCCESS
}
