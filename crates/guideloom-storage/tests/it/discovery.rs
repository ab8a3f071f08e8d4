//! The file-system pieces for users who manage shard files themselves (moved from
//! guideloom-format's `shard` tests).

use std::collections::BTreeMap;

use guideloom_format::{Error, ReadOptions};
use guideloom_storage::{FileSystemDocument, FileSystemStream};

#[test]
fn file_system_pieces_write_discover_and_open() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = FileSystemDocument::new(tmp.path().join("own"), "raw");
    assert!(fs.discover().unwrap().is_empty());
    assert!(matches!(
        fs.open_shard(0, &ReadOptions::default()),
        Err(Error::NotFound { .. })
    ));
    for n in 0..2 {
        let mut w = fs.create_shard(n, BTreeMap::new()).unwrap();
        w.append(&[n as u8; 3]).unwrap();
        w.finish().unwrap();
    }
    let found = fs.discover().unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[1].path, fs.shard_path(1));
    assert_eq!((found[1].records, found[1].data_len), (1, 3));
    let shard = fs.open_shard(1, &ReadOptions::default()).unwrap();
    assert_eq!(&shard.read(0).unwrap()[..], &[1, 1, 1]);
    assert!(fs.shard_path(1).ends_with("shard-000001.glm"));
    // The same files are not a u16 stream.
    let st = FileSystemStream::<u16>::new(tmp.path().join("own"));
    assert!(matches!(st.discover(), Err(Error::FormatMismatch { .. })));
    assert!(matches!(
        st.open_shard(0, &ReadOptions::default()),
        Err(Error::FormatMismatch { .. })
    ));
}
