//! The real mounted bucket of `cargo xtask servers up rclone` (started by `cargo xtask ci`
//! unless `GUIDELOOM_XTASK_MOUNT=0`): an `rclone mount --vfs-cache-mode off` of an S3 bucket,
//! named by `GUIDELOOM_MOUNT_DIR`, `GUIDELOOM_MOUNT_S3_ENDPOINT` and
//! `GUIDELOOM_MOUNT_S3_BUCKET`. A test uses a unique subdirectory of the mount, which is the
//! key prefix `<subdirectory>/` in the bucket.

use std::path::{Path, PathBuf};

use crate::{Moto, missing, s3_store, var};

/// The mount and the bucket behind it.
#[derive(Debug)]
pub struct Mount {
    /// The mount point (a FUSE file system).
    pub dir: PathBuf,
    /// The same bucket, addressed over S3 at the same endpoint.
    pub s3: Moto,
}

/// Whether `cargo xtask ci` mounts the bucket in this run: by default, unless
/// `GUIDELOOM_XTASK_MOUNT=0` (the opt-out, inherited by the test processes).
fn ci_mounts() -> bool {
    std::env::var("GUIDELOOM_XTASK_MOUNT").as_deref() != Ok("0")
}

/// Whether `dir` is a mount point of this process's mount namespace.
pub fn is_mount_point(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| {
        info.lines()
            .filter_map(|line| line.split(' ').nth(4))
            .any(|point| Path::new(&point.replace("\\040", " ")) == dir)
    })
}

/// The mount: `None` after a printed `skipped: ...` line when its variables are absent or the
/// directory is not mounted; a panic instead under `GUIDELOOM_CI=1`, unless CI was told not
/// to mount (`GUIDELOOM_XTASK_MOUNT=0`).
pub fn mount(test: &str) -> Option<Mount> {
    let vars = "GUIDELOOM_MOUNT_DIR/GUIDELOOM_MOUNT_S3_ENDPOINT/GUIDELOOM_MOUNT_S3_BUCKET";
    let (Some(dir), Some(endpoint), Some(bucket)) = (
        var("GUIDELOOM_MOUNT_DIR"),
        var("GUIDELOOM_MOUNT_S3_ENDPOINT"),
        var("GUIDELOOM_MOUNT_S3_BUCKET"),
    ) else {
        if ci_mounts() {
            return missing(test, vars);
        }
        println!("skipped: {test}: {vars} not set (GUIDELOOM_XTASK_MOUNT=0)");
        return None;
    };
    let dir = PathBuf::from(dir);
    if !is_mount_point(&dir) {
        let why = format!(
            "GUIDELOOM_MOUNT_DIR={} is not mounted (`cargo xtask servers up rclone`)",
            dir.display()
        );
        assert!(
            std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
            "{test}: GUIDELOOM_CI=1 but {why}"
        );
        println!("skipped: {test}: {why}");
        return None;
    }
    Some(Mount {
        dir,
        s3: Moto {
            store: s3_store(&endpoint, &bucket),
            endpoint,
            bucket,
        },
    })
}
