//! The storages' public types are `Send + Sync` (readers are shared across threads and
//! tasks). Moved from guideloom-format's `send_sync` with the storages.

use guideloom_format::RawFormat;
use guideloom_storage::*;

fn send_sync<T: Send + Sync>() {}

#[test]
fn storage_types_are_send_and_sync() {
    type Raw = RawFormat;
    send_sync::<DocumentReader<Raw>>();
    send_sync::<AsyncDocumentReader<Raw>>();
    send_sync::<DocumentWriter<Raw>>();
    send_sync::<DocumentStorage<Raw>>();
    send_sync::<StreamReader<u32>>();
    send_sync::<AsyncStreamReader<u32>>();
    send_sync::<StreamWriter<u32>>();
    send_sync::<StreamWithMetaReader<u16, String>>();
    send_sync::<AsyncStreamWithMetaReader<u16, String>>();
    send_sync::<StreamWithMetaWriter<u16, String>>();
}

#[test]
fn async_reads_are_send_futures() {
    fn send<T: Send>(_: T) {}
    let storage = DocumentStorage::new(
        std::path::PathBuf::new(),
        RawFormat,
        guideloom_io::SeekIo::new(),
    );
    send(storage.async_reader());
    let s = StreamStorage::<u8, _>::new(std::path::PathBuf::new(), guideloom_io::SeekIo::new());
    send(s.async_reader());
}
