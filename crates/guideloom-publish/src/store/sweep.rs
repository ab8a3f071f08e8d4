//! Sweeping a local root's leftover temporary files.
//!
//! A local root writes each object to `.<final name>.<pid>.<nonce>.tmp` beside its final name,
//! then hard-links it into place and unlinks the temporary name. A writer killed in between
//! (SIGKILL, power loss, OOM) leaves the temporary file behind: listings and readers ignore it,
//! but it takes space. [`RootStore::sweep_temporaries`](super::RootStore::sweep_temporaries)
//! removes those whose writer is gone.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// What [`RootStore::sweep_temporaries`](super::RootStore::sweep_temporaries) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sweep {
    /// Temporary files removed, as paths relative to the root (`/`-separated).
    pub removed: Vec<String>,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Temporary files kept: younger than the minimum age, or whose writer may still run.
    pub kept: usize,
}

/// The writer PID embedded in a local store's temporary name
/// (`.<final>.<pid>.<nonce>.tmp`), if the name has that shape.
fn writer_pid(name: &str) -> Option<i32> {
    let stem = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = stem.rsplitn(3, '.');
    let _nonce = parts.next()?;
    let pid = parts.next()?.parse::<i32>().ok()?;
    let _final_name = parts.next()?;
    (pid > 0).then_some(pid)
}

/// Whether process `pid` may still be running on this host. Unknown means yes.
fn may_be_running(pid: Option<i32>) -> bool {
    let Some(pid) = pid else {
        // No PID in the name (not ours, or another tool's): only its age can clear it.
        return false;
    };
    if pid == std::process::id() as i32 {
        return true;
    }
    #[cfg(unix)]
    {
        use nix::errno::Errno;
        use nix::sys::signal::kill;
        use nix::unistd::Pid;
        // Signal 0 checks existence without sending anything; EPERM means it exists.
        !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Removes the `.…tmp` files under `root` that are at least `min_age` old and whose writer
/// (by the PID in the name) no longer runs on this host. Lock files and objects are never
/// touched. With several hosts writing one shared directory, choose a `min_age` longer than
/// any write takes: a PID from another host is not checked here.
pub(crate) fn sweep_dir(root: &Path, min_age: Duration) -> Result<Sweep> {
    let mut sweep = Sweep::default();
    let now = SystemTime::now();
    super::local::walk(root, "", &mut |rel, path, meta| {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if !(name.starts_with('.') && name.ends_with(".tmp") && meta.is_file()) {
            return Ok(());
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if age < min_age || may_be_running(writer_pid(name)) {
            sweep.kept += 1;
            return Ok(());
        }
        match std::fs::remove_file(path) {
            Ok(()) => {
                sweep.bytes += meta.len();
                sweep.removed.push(rel.to_owned());
            }
            // Another sweeper (or the writer's own cleanup) got there first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
        Ok(())
    })?;
    sweep.removed.sort();
    tracing::info!(root = %root.display(), removed = sweep.removed.len(), bytes = sweep.bytes, kept = sweep.kept, "swept temporaries");
    Ok(sweep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_read_from_local_temporary_names() {
        assert_eq!(writer_pid(".0.glm.4242.9f3a.tmp"), Some(4242));
        assert_eq!(writer_pid(".catalog.json.17.abc.tmp"), Some(17));
        assert_eq!(writer_pid(".shard-000001.glm.Ab12Cd.tmp"), None);
        assert_eq!(writer_pid(".catalog.json.lock"), None);
        assert_eq!(writer_pid("0.glm"), None);
    }

    #[test]
    fn only_old_temporaries_of_dead_writers_go() {
        let dir = tempfile::tempdir().unwrap();
        let shards = dir.path().join("shards/w");
        std::fs::create_dir_all(&shards).unwrap();
        // A PID that cannot be running: beyond the kernel's pid_max (2^22 at most).
        let dead = ".0.glm.2147483000.aa.tmp";
        let live = format!(".1.glm.{}.bb.tmp", std::process::id());
        for name in [dead, live.as_str(), "0.glm", ".catalog.json.lock"] {
            std::fs::write(shards.join(name), b"12345").unwrap();
        }
        // Too young for a one-hour minimum age: nothing goes.
        let young = sweep_dir(dir.path(), Duration::from_secs(3600)).unwrap();
        assert_eq!((young.removed.len(), young.kept), (0, 2));
        let swept = sweep_dir(dir.path(), Duration::ZERO).unwrap();
        assert_eq!(swept.removed, vec![format!("shards/w/{dead}")]);
        assert_eq!((swept.bytes, swept.kept), (5, 1));
        for kept in [live.as_str(), "0.glm", ".catalog.json.lock"] {
            assert!(shards.join(kept).exists(), "{kept} kept");
        }
        assert!(!shards.join(dead).exists());
    }
}
