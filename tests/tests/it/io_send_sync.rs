//! Every public type of `guideloom-io` is `Send + Sync + Debug + 'static`, and the trait
//! objects storages hold satisfy generic bounds (in the style of tokio's
//! `tests/async_send_sync.rs`). A failure here is a compile error.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use guideloom_io::conformance::{
    ConformanceError, ConformanceOptions, ConformanceReport, DirFixture, Flavour, FnFixture,
};
use guideloom_io::{
    AsyncReader, Backend, BoxError, Capabilities, CoalescePolicy, CountingReader, DynBackend,
    Error, MmapIo, PreadIo, RequestStats, SeekIo, StatsSnapshot, SyncReader, Tail,
};

fn public_type<T: Send + Sync + Debug + 'static>() {}

fn backend_bound<B: Backend<Location = PathBuf>>(_: &B) {}
fn sync_reader_bound<R: SyncReader + Send + Sync + 'static>(_: &R) {}
fn async_reader_bound<R: AsyncReader + Send + Sync + 'static>(_: &R) {}
fn send_future<F: std::future::Future + Send>(f: F) -> F {
    f
}

#[test]
fn public_types_are_send_sync_debug_static() {
    public_type::<SeekIo>();
    public_type::<PreadIo>();
    public_type::<MmapIo>();
    public_type::<Error>();
    public_type::<Capabilities>();
    public_type::<CoalescePolicy>();
    public_type::<guideloom_io::coalesce::MergedRange>();
    public_type::<Tail>();
    public_type::<RequestStats>();
    public_type::<StatsSnapshot>();
    public_type::<CountingReader<Box<dyn SyncReader>>>();
    public_type::<CountingReader<Box<dyn AsyncReader>>>();
    public_type::<BoxError>();
    public_type::<Box<dyn SyncReader>>();
    public_type::<Box<dyn AsyncReader>>();
    public_type::<Arc<dyn AsyncReader>>();
    public_type::<DynBackend<PathBuf>>();
    // The conformance kit.
    public_type::<ConformanceError>();
    public_type::<ConformanceReport>();
    public_type::<ConformanceOptions>();
    public_type::<Flavour>();
    public_type::<DirFixture>();
    public_type::<FnFixture<PathBuf, fn(&str, &[u8]) -> Result<PathBuf, BoxError>>>();
}

#[test]
fn trait_objects_satisfy_generic_bounds() {
    let dynamic: Arc<dyn Backend<Location = PathBuf>> = Arc::new(PreadIo::new());
    backend_bound(&dynamic);
    let boxed: Box<dyn Backend<Location = PathBuf>> = Box::new(SeekIo::new());
    backend_bound(&boxed);
    let typed: DynBackend<PathBuf> = Arc::new(MmapIo::new());
    backend_bound(&typed);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"abc").unwrap();
    let reader: Box<dyn SyncReader> = dynamic.open(&path).unwrap();
    sync_reader_bound(&reader);
    sync_reader_bound(&Arc::new(reader));
    sync_reader_bound(&CountingReader::new(typed.open(&path).unwrap()));
}

#[tokio::test]
async fn async_readers_and_their_futures_are_send() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"abc").unwrap();
    let backend: DynBackend<PathBuf> = Arc::new(SeekIo::new());
    let reader: Box<dyn AsyncReader> = send_future(backend.open_async(&path)).await.unwrap();
    async_reader_bound(&reader);
    let shared: Arc<dyn AsyncReader> = Arc::from(reader);
    async_reader_bound(&shared);
    // Reads can be spawned onto other worker threads.
    let task = tokio::spawn({
        let shared = Arc::clone(&shared);
        async move { shared.read(0, 3).await }
    });
    assert_eq!(&task.await.unwrap().unwrap()[..], b"abc");
    drop(send_future(shared.read_tail(2)));
    drop(send_future(shared.close()));
    // The kit's async entry point can be spawned too.
    let fixture = DirFixture::new(dir.path());
    drop(send_future(guideloom_io::conformance::run_async(
        &backend, &fixture,
    )));
}
