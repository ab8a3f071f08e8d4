//! `guideloom quickstart`: the whole path on a fresh machine, no servers — synthetic caption
//! records written by several workers, published, annotated, read back, verified.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use guideloom::Dataset;
use guideloom_format::RunBudget;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::cli::{Global, QuickstartArgs};
use crate::commands::{annotate, publish, verify, write};
use crate::error::{CliError, Result};
use crate::json::record_to_json;
use crate::output;
use crate::root;

const WORDS: &[&str] = &[
    "a", "the", "red", "small", "old", "bright", "wooden", "dog", "cat", "bicycle", "boat",
    "street", "mountain", "lake", "child", "woman", "man", "train", "market", "window", "sits",
    "runs", "stands", "near", "under", "beside", "at", "sunset", "night", "in", "rain", "snow",
    "with", "two", "three", "people", "tree", "house", "bridge", "field", "on", "of",
];
/// Random record reads timed by the quickstart.
const RANDOM_READS: u64 = 200;
/// Shard size used by the quickstart, so each worker writes several shards.
const SHARD_BYTES: u64 = 128 << 10;

/// One synthetic caption record: id, text, token ids and image size.
fn caption(rng: &mut StdRng, worker: u64, index: u64) -> serde_json::Value {
    let len = rng.random_range(6..18);
    let mut tokens = Vec::with_capacity(len);
    let mut words = Vec::with_capacity(len);
    for _ in 0..len {
        let t = rng.random_range(0..WORDS.len());
        tokens.push(t as u64 + 1000);
        words.push(WORDS[t]);
    }
    json!({
        "id": format!("cap-{worker:02}-{index:06}"),
        "text": words.join(" "),
        "tokens": tokens,
        "width": 64 * rng.random_range(4..33u32),
        "height": 64 * rng.random_range(4..33u32),
    })
}

/// Batch size of the quickstart's loader epoch.
const LOADER_BATCH: u64 = 64;

/// Runs epoch 0 of a [`guideloom::Loader`] over the published dataset on a plain thread (the
/// sync `Dataset` owns its own runtime) and checks that every record arrives exactly once.
fn loader_epoch(uri: &str, per_worker: u64, records: u64) -> Result<(u64, u64)> {
    let uri = uri.to_owned();
    let fail = |what: String| CliError::argument("loader", what);
    let run = move || -> std::result::Result<(u64, u64), String> {
        let dataset = guideloom::Dataset::open(&uri).map_err(|e| e.to_string())?;
        let options = guideloom::LoaderOptions::new(LOADER_BATCH)
            .with_seed(7)
            .with_workers(2);
        let loader = guideloom::Loader::new(dataset, options, move |i, bytes: bytes::Bytes| {
            let v = record_to_json("cbor", &bytes)?;
            let want = format!("cap-{:02}-{:06}", i / per_worker, i % per_worker);
            if v["id"] == json!(want) {
                Ok(i)
            } else {
                Err(format!(
                    "record {i} decodes as {} instead of {want}",
                    v["id"]
                ))
            }
        })
        .map_err(|e| e.to_string())?;
        let mut seen = vec![false; usize::try_from(records).map_err(|e| e.to_string())?];
        let mut batches = 0;
        for batch in loader.epoch(0).map_err(|e| e.to_string())? {
            let batch = batch.map_err(|e| e.to_string())?;
            batches += 1;
            for i in batch.records {
                let slot = usize::try_from(i)
                    .ok()
                    .and_then(|i| seen.get_mut(i))
                    .ok_or_else(|| format!("record {i} out of range"))?;
                if std::mem::replace(slot, true) {
                    return Err(format!("record {i} delivered twice"));
                }
            }
        }
        let delivered = seen.iter().filter(|s| **s).count() as u64;
        if delivered != records {
            return Err(format!("{delivered} of {records} records delivered"));
        }
        Ok((batches, delivered))
    };
    std::thread::spawn(run)
        .join()
        .map_err(|_| fail("the loader thread panicked".into()))?
        .map_err(fail)
}

fn check_target(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CliError::argument(
                    dir.display().to_string(),
                    "is not empty; quickstart builds into an empty or new directory",
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| CliError::file(dir, e))
        }
        Err(e) => Err(CliError::file(dir, e)),
    }
}

fn fresh_dir() -> Result<PathBuf> {
    let tmp = std::env::temp_dir();
    let dir = tempfile::Builder::new()
        .prefix("guideloom-quickstart-")
        .tempdir_in(&tmp)
        .map_err(|e| CliError::file(&tmp, e))?;
    Ok(dir.keep())
}

/// Reads every record of `dataset` in order (consecutive records of a shard read together)
/// as JSON and hands each to `each` with its index; stops at the first error, a record that
/// is not JSON naming its shard. Returns the number of records read.
async fn for_each_json(
    root: &root::OpenRoot,
    dataset: &Dataset,
    mut each: impl FnMut(u64, serde_json::Value) -> Result<()>,
) -> Result<u64> {
    let shards = dataset.snapshot().shards();
    let mut runs = dataset
        .read_in_order(0..dataset.len(), RunBudget::default())
        .map_err(|e| root.err(e))?;
    let mut index = 0u64;
    while let Some(run) = runs.next_run().await {
        let run = run.map_err(|e| root.err(e))?;
        let key = &shards[run.shard].key;
        for bytes in run.records {
            let v = record_to_json("cbor", &bytes)
                .map_err(|what| CliError::argument(key.clone(), what))?;
            each(index, v)?;
            index += 1;
        }
    }
    Ok(index)
}

/// One timed step of the run.
struct Step {
    name: &'static str,
    took: Duration,
    detail: String,
}

/// Runs `guideloom quickstart`.
pub(crate) async fn run(args: QuickstartArgs, global: &Global) -> Result<()> {
    let dir = match args.dir {
        Some(d) => {
            check_target(&d)?;
            d
        }
        None => fresh_dir()?,
    };
    let dir = std::path::absolute(&dir).map_err(|e| CliError::file(&dir, e))?;
    let input_dir = dir.join("input");
    let root_dir = dir.join("dataset");
    std::fs::create_dir_all(&input_dir).map_err(|e| CliError::file(&input_dir, e))?;
    let root_arg = root_dir.display().to_string();
    let root = root::open(&root_arg, global, false)?;
    let mut steps: Vec<Step> = Vec::new();
    let total_started = Instant::now();
    let say = |text: String| -> Result<()> {
        if global.json {
            Ok(())
        } else {
            output::line(&text)
        }
    };
    say(format!("guideloom quickstart in {}", dir.display()))?;

    // 1. Synthetic inputs: one JSON Lines file per worker.
    let t = Instant::now();
    let mut rng = StdRng::seed_from_u64(2026);
    let mut inputs = Vec::new();
    for w in 0..args.workers {
        let path = input_dir.join(format!("worker-{w:02}.jsonl"));
        let file = std::fs::File::create(&path).map_err(|e| CliError::file(&path, e))?;
        let mut out = std::io::BufWriter::new(file);
        for i in 0..args.records_per_worker {
            let line = caption(&mut rng, w, i).to_string();
            writeln!(out, "{line}").map_err(|e| CliError::file(&path, e))?;
        }
        out.flush().map_err(|e| CliError::file(&path, e))?;
        inputs.push(path);
    }
    let records = args.workers * args.records_per_worker;
    steps.push(Step {
        name: "generate",
        took: t.elapsed(),
        detail: format!(
            "{records} caption records in {} JSON Lines file(s) under {}",
            inputs.len(),
            input_dir.display()
        ),
    });

    // 2. Each worker writes its shards (what `guideloom write` does).
    let t = Instant::now();
    let mut shard_count = 0;
    let mut shard_bytes = 0;
    for (w, path) in inputs.iter().enumerate() {
        let work_id = format!("worker-{w:02}");
        let size = std::fs::metadata(path).ok().map(|m| m.len());
        let bar = output::progress_bytes(global.json, size, &work_id);
        let written = write::write_records(
            &root,
            &work_id,
            "cbor",
            SHARD_BYTES,
            write::Input::Records(crate::input::jsonl_records(
                path,
                usize::try_from(SHARD_BYTES).unwrap_or(usize::MAX),
            )?),
            &bar,
        )
        .await?;
        bar.finish_and_clear();
        shard_count += written.shards.len();
        shard_bytes += written.bytes;
    }
    steps.push(Step {
        name: "write",
        took: t.elapsed(),
        detail: format!(
            "{shard_count} shard(s), {} under {}/shards/",
            output::bytes(shard_bytes),
            root_dir.display()
        ),
    });

    // 3. Publish them as one snapshot (sizes, record counts and footer checksums checked).
    let t = Instant::now();
    let snapshot = publish::publish(
        &root,
        "captions",
        "v1",
        publish::Choice::default(),
        false,
        true,
    )
    .await?
    .snapshot;
    steps.push(Step {
        name: "publish",
        took: t.elapsed(),
        detail: format!(
            "snapshot {} (#{}) of dataset captions: {} records",
            snapshot.id(),
            snapshot.seq(),
            snapshot.total_records()
        ),
    });

    // 4. Annotate: a quality score per record, in record order.
    let t = Instant::now();
    let dataset = root.dataset(snapshot.clone());
    let mut scores = Vec::with_capacity(usize::try_from(records).unwrap_or(0));
    for_each_json(&root, &dataset, |_, v| {
        let words = v["tokens"].as_array().map_or(0, Vec::len);
        scores.push(json!({"quality": (words as f64 / 18.0 * 100.0).round() / 100.0}));
        Ok(())
    })
    .await?;
    let entry =
        annotate::annotate(&root, &snapshot, "quality", "v1", &scores, "quality scores").await?;
    steps.push(Step {
        name: "annotate",
        took: t.elapsed(),
        detail: format!(
            "{}/{}: {} values in {}",
            entry.set, entry.version, entry.value_count, entry.key
        ),
    });

    // 5. Read back: random records, then everything in order; check each record's id.
    let t = Instant::now();
    let expected_id = |i: u64| {
        format!(
            "cap-{:02}-{:06}",
            i / args.records_per_worker,
            i % args.records_per_worker
        )
    };
    for _ in 0..RANDOM_READS.min(records) {
        let i = rng.random_range(0..records);
        let v = root.get_json(&dataset, i).await?;
        if v["id"] != json!(expected_id(i)) {
            return Err(CliError::argument(
                &root.name,
                format!(
                    "record {i} reads back as {} instead of {}",
                    v["id"],
                    expected_id(i)
                ),
            ));
        }
    }
    let random_took = t.elapsed();
    steps.push(Step {
        name: "random reads",
        took: random_took,
        detail: format!(
            "{} records by index ({:.0} µs each, one ranged read each, shards opened once)",
            RANDOM_READS.min(records),
            random_took.as_secs_f64() * 1e6 / RANDOM_READS.min(records).max(1) as f64
        ),
    });
    let t = Instant::now();
    let seen = for_each_json(&root, &dataset, |i, v| {
        if v["id"] == json!(expected_id(i)) {
            return Ok(());
        }
        Err(CliError::argument(
            &root.name,
            format!(
                "record {i} reads back as {} instead of {}",
                v["id"],
                expected_id(i)
            ),
        ))
    })
    .await?;
    steps.push(Step {
        name: "sequential read",
        took: t.elapsed(),
        detail: format!("{seen} records in order, ids checked"),
    });

    // 6. One shuffled epoch through the facade's Loader (batches of 64, 2 decode workers):
    //    every record exactly once, each decoded and its id checked.
    let t = Instant::now();
    let (batches, loaded) = loader_epoch(&root_arg, args.records_per_worker, records)?;
    steps.push(Step {
        name: "loader epoch",
        took: t.elapsed(),
        detail: format!(
            "{loaded} records in {batches} shuffled batches of {LOADER_BATCH} (seed 7, 2 workers), each exactly once"
        ),
    });

    let labels = root
        .root
        .annotations("quality", None, &snapshot, false)
        .await
        .map_err(|e| root.err(e))?;
    let q0: serde_json::Value = labels.get(0).map_err(|e| root.err(e))?;

    // 7. Verify everything, every record checksum included.
    let t = Instant::now();
    let report = verify::verify(&root, std::slice::from_ref(&snapshot), true, true).await?;
    if let Some(p) = report.problems.first() {
        return Err(CliError::argument(p.object.clone(), p.what.clone()));
    }
    steps.push(Step {
        name: "verify --deep",
        took: t.elapsed(),
        detail: format!(
            "{} shard(s), {} record checksums: sound",
            report.shards, report.records_checked
        ),
    });

    let total = total_started.elapsed();
    if global.json {
        return output::print_json(&json!({
            "dir": dir,
            "root": root_arg,
            "inputs": input_dir,
            "dataset_id": "captions",
            "snapshot_id": snapshot.id(),
            "records": records,
            "shards": shard_count,
            "bytes": shard_bytes,
            "annotation_set": format!("{}/{}", entry.set, entry.version),
            "steps": steps.iter().map(|s| json!({"step": s.name, "seconds": s.took.as_secs_f64(), "detail": s.detail})).collect::<Vec<_>>(),
            "seconds": total.as_secs_f64(),
        }));
    }
    for s in &steps {
        say(format!(
            "  {:<16} {:>9}  {}",
            s.name,
            output::secs(s.took),
            s.detail
        ))?;
    }
    say(format!("  {:<16} {:>9}", "total", output::secs(total)))?;
    say(format!(
        "record 0: {}  quality: {q0}",
        root.get_json(&dataset, 0).await?
    ))?;
    let (program, installed) = program();
    let r = shell_quote(&root_arg);
    let mut next = format!(
        "\nThe dataset is at {root_arg}. Try (each runs as printed):\n  {program} info {r}\n  {program} get {r} 42\n  {program} cat {r} --start 0 --end 5\n  {program} annotations {r} quality --end 5\n  {program} verify {r} --deep\n  {program} bench {r}"
    );
    if !installed {
        next.push_str(
            "\n`guideloom` is not on PATH: install it from the repository with\n  cargo install --path crates/guideloom-cli\nand the commands above also run as `guideloom ...`.",
        );
    }
    say(next)
}

/// How to run this program again: `guideloom` when that name on `PATH` is this executable
/// (`true`), else this executable's absolute path (e.g. `target/release/guideloom` after
/// `cargo run`), shell-quoted (`false`).
fn program() -> (String, bool) {
    let Ok(exe) = std::env::current_exe() else {
        return ("guideloom".to_owned(), false);
    };
    let exe = exe.canonicalize().unwrap_or(exe);
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            dir.join("guideloom")
                .canonicalize()
                .is_ok_and(|found| found == exe)
        })
    });
    if on_path {
        ("guideloom".to_owned(), true)
    } else {
        (shell_quote(&exe.display().to_string()), false)
    }
}

/// `text` as one POSIX shell word: as it is when it holds only safe characters, else in
/// single quotes (a `'` inside written as `'\''`).
fn shell_quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=@%,".contains(&b));
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
