//! Sweeping a local root's leftover temporary files.
//!
//! A local root writes each object to `.<final name>.<pid>.<nonce>.tmp` beside its final name,
//! then hard-links it into place and unlinks the temporary name. A writer killed in between
//! (SIGKILL, power loss, OOM) leaves the temporary file behind: listings and readers ignore it,
//! but it takes space. [`RootStore::sweep_temporaries`](super::RootStore::sweep_temporaries)
//! removes those whose writer is gone.

use std::time::{Duration, SystemTime};

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

/// Whether the temporary file `name` (last modified at `modified`) may be removed: at least
/// `min_age` old at `now`, and its writer (by the PID in the name) no longer runs on this
/// host. With several hosts writing one shared directory, choose a `min_age` longer than any
/// write takes: a PID from another host is not checked here.
pub(crate) fn removable(
    name: &str,
    modified: SystemTime,
    now: SystemTime,
    min_age: Duration,
) -> bool {
    let age = now.duration_since(modified).unwrap_or_default();
    age >= min_age && !may_be_running(writer_pid(name))
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
}
