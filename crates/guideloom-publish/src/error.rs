//! The crate's one error type.

use std::path::PathBuf;

use guideloom_io::ErrorKind;

/// A boxed error source, `Send + Sync` so errors cross threads and tasks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with this crate's [`enum@Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while publishing to or reading from a dataset root.
///
/// Variants name the object at fault (`key`, relative to the root, or `path` for local
/// files) so a log line says which object. [`Error::kind`] says what went wrong in one word;
/// match on the kind or on variants, never on message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A create-only object already exists with different content: another writer got there
    /// first. Nothing was overwritten.
    #[error("publication collision: {key} already exists with different content")]
    PublicationCollision {
        /// The object that already exists (relative to the root).
        key: String,
    },
    /// The object does not exist.
    #[error("not found: {key}")]
    NotFound {
        /// The missing object.
        key: String,
    },
    /// A control object (identity, manifest, pointer, catalog) is malformed or hostile.
    #[error("corrupt object {key}: {what}")]
    Corrupt {
        /// The object at fault.
        key: String,
        /// What is wrong with it.
        what: String,
    },
    /// An object's size or content hash differs from the reference that points at it.
    ///
    /// For a shard this is also how a **replaced** object shows: opening it compares its
    /// size, record count and footer (`"footer checksum"`) or tail (`"tail checksum"`)
    /// CRC32C with the manifest's, and a remote reader pins the version it opened, so a
    /// replacement behind it fails its next read (`"entity tag"`: the store refused
    /// `If-Match`, or answered with another tag).
    #[error("verification failed for {key}: {what}: expected {expected}, found {actual}")]
    Verification {
        /// The object at fault.
        key: String,
        /// Which property differs (`"size"`, `"sha256"`, `"record count"`, `"footer
        /// checksum"`, `"tail checksum"`, `"entity tag"`, ...).
        what: &'static str,
        /// The value the reference expects.
        expected: String,
        /// The value found.
        actual: String,
    },
    /// The root belongs to another dataset.
    #[error("the root holds dataset {actual:?}, not {expected:?}")]
    DatasetMismatch {
        /// The dataset id asked for.
        expected: String,
        /// The dataset id in `dataset.json`.
        actual: String,
    },
    /// An annotation set annotates another snapshot than the one it is read against, and the
    /// caller did not opt in to that.
    #[error(
        "annotation set {set} annotates snapshot {annotated:?}, not {requested:?}; opt in with          allow_other_snapshot to read it anyway"
    )]
    AnnotationSnapshotMismatch {
        /// The set (`name/version`).
        set: String,
        /// The snapshot it annotates.
        annotated: String,
        /// The snapshot it was read against.
        requested: String,
    },
    /// A count supplied by the caller does not match the count it must equal.
    #[error("count mismatch for {what}: expected {expected}, got {actual}")]
    CountMismatch {
        /// What was counted (e.g. `"annotation values vs snapshot records"`).
        what: String,
        /// The count required.
        expected: u64,
        /// The count supplied.
        actual: u64,
    },
    /// A publication's schema does not evolve from the latest snapshot's (a changed type, a
    /// dropped field, a new required field...): that needs a new dataset.
    #[error("snapshot {snapshot_id:?} refused: {detail}")]
    SchemaChange {
        /// The snapshot being published.
        snapshot_id: String,
        /// The field and the change.
        detail: String,
    },
    /// Garbage collection removed (or, running now, is removing) `key`, which this operation
    /// needs: a publication of shards a collection found unreferenced, an annotation set
    /// whose values it found orphaned. Nothing was committed. Write the objects again under
    /// a new work id (or set version) and publish those; a retry of the same request after
    /// the collection ended fails with [`Error::NotFound`] if the object is gone.
    #[error("{key} was collected by garbage collection {by} (write it again and publish that)")]
    Collected {
        /// The object.
        key: String,
        /// The collection's record (`gc/<run>.json`) or the catalog's `collected` list.
        by: String,
    },
    /// The snapshot expired under the root's retention policy: garbage collection may have
    /// deleted its shards. Its log entry stays (the log has no gap), but its records cannot
    /// be read and it cannot be tagged or annotated. Open a kept snapshot (`Root::snapshots`
    /// marks which) or a tag.
    #[error("snapshot {snapshot_id:?} (#{seq}) expired under the retention policy")]
    SnapshotExpired {
        /// The snapshot.
        snapshot_id: String,
        /// Its sequence number.
        seq: u64,
    },
    /// A compare-and-swap (or a sequence-number commit) kept losing races and gave up.
    #[error("gave up updating {key} after {attempts} attempts (concurrent writers kept winning)")]
    CasExhausted {
        /// The contended object or prefix.
        key: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The snapshot log is damaged: entry `missing` does not exist but a later one (`newest`)
    /// does, so an entry was deleted by hand. Readers all open the entry before the gap
    /// ([`Root::latest`](crate::Root::latest)); publication is refused rather than build on
    /// a log whose order is in doubt. Restore the missing entries (or remove the ones after
    /// the gap) and run `guideloom verify`.
    #[error(
        "the snapshot log is damaged: log entry {missing} is missing but entry {newest} exists \
         (deleted by hand?); readers see snapshot #{} as the latest and publication is refused \
         until the log is repaired",
        missing - 1
    )]
    LogGap {
        /// The first missing sequence number.
        missing: u64,
        /// The newest entry that exists.
        newest: u64,
    },
    /// The store does not honour conditional writes; publishing to it would be unsafe.
    #[error("{endpoint} does not support safe conditional writes: {problem}")]
    ConditionalWritesUnsupported {
        /// The store (scheme, bucket, endpoint; never credentials).
        endpoint: String,
        /// What the probe observed.
        problem: String,
    },
    /// Annotation (catalog) updates are refused on a declared mounted bucket.
    #[error(
        "{root} is a declared mounted bucket, which has no compare-and-swap: publish annotations \
         against the s3:// root that addresses the same dataset"
    )]
    MountedBucketCannotAnnotate {
        /// The mounted root.
        root: String,
    },
    /// A shard is larger than one PUT may carry (`RootOptions::max_encoded_shard_bytes`).
    /// A shard being written is refused the moment its running size passes the limit, so
    /// `size` is then a lower bound: the bytes it had reached.
    #[error(
        "shard {key} passed the {limit}-byte single-PUT limit (max_encoded_shard_bytes) at \
         {size} bytes; write smaller shards"
    )]
    ShardTooLarge {
        /// The shard.
        key: String,
        /// Its size (an uploaded or published shard), or the bytes a shard being written had
        /// reached when it passed the limit.
        size: u64,
        /// The configured limit.
        limit: u64,
    },
    /// The root is read-only (an `http(s)://` base URL): publication, shard uploads and
    /// annotation updates are refused before any request. Publish to the root the web
    /// server serves (a local directory or a bucket) instead.
    #[error(
        "{root} is a read-only root (HTTP roots are served, not written): publish to the \
         directory or bucket behind it"
    )]
    ReadOnlyRoot {
        /// The root, as [`RootStore::describe`](crate::RootStore::describe) shows it.
        root: String,
    },
    /// Whole-shard staging cannot fit a shard into its byte budget: the shard alone is larger
    /// than the budget, or the shards other readers hold leave too little room.
    #[error(
        "cannot stage {key} ({size} bytes): the staging budget is {budget} bytes and {held} \
         bytes are held by open readers; raise StagingOptions::budget_bytes or read by ranges"
    )]
    StagingBudget {
        /// The shard to stage.
        key: String,
        /// Its size.
        size: u64,
        /// The configured budget (`StagingOptions::budget_bytes`).
        budget: u64,
        /// Bytes of staged shards that readers hold and that cannot be evicted.
        held: u64,
    },
    /// An object is larger than the reference that points at it allows, or than the
    /// documented cap for its kind (control objects, annotation values). Refused before its
    /// body is read: a hostile root cannot make a reader allocate more than the cap.
    #[error("{key} is {} bytes, above the {limit}-byte limit for it", size_text(*size, *limit))]
    TooLarge {
        /// The object (relative to the root).
        key: String,
        /// The largest size accepted.
        limit: u64,
        /// Its size, when the store announced one (`None`: it kept sending past the limit).
        size: Option<u64>,
    },
    /// A local root found something other than a regular file or a real directory where it
    /// reads or writes: a symbolic link (local roots never follow links beneath the root
    /// directory unless opted in with `StoreOptions::follow_symlinks`), a FIFO, a device
    /// or a socket. Refused at once, without opening it for I/O.
    #[error("refusing {}: it is {kind}, and a local root opens only {expected} (never through a symbolic link)", path.display())]
    RefusedFile {
        /// The entry refused.
        path: PathBuf,
        /// What it is (`"a symbolic link"`, `"a FIFO"`, `"a character device"`, ...).
        kind: &'static str,
        /// What was expected there (`"regular files"`, `"real directories"`).
        expected: &'static str,
    },
    /// The file system holding `dir` is full (ENOSPC) or over quota (EDQUOT): nothing was
    /// published under a final name; free space and retry the same request.
    #[error("no space left on the file system holding {} (while writing {}): {source}", dir.display(), path.display())]
    DiskFull {
        /// The directory whose file system is full.
        dir: PathBuf,
        /// The file being written (an unnamed temporary file: its directory).
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The operation or root kind is not available in this build or on this store.
    #[error("unsupported: {what}")]
    Unsupported {
        /// What is unsupported, and what to do instead.
        what: String,
    },
    /// A named AWS profile is missing or unusable, or the shared AWS config files could not
    /// be read (feature `aws-profile`). Never carries credentials.
    #[error("AWS profile {profile:?}: {what}")]
    AwsProfile {
        /// The profile asked for.
        profile: String,
        /// What is wrong (e.g. which files were searched).
        what: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A root URI could not be parsed.
    #[error("invalid root URI {uri:?}: {reason}")]
    InvalidUri {
        /// The URI given.
        uri: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A record index past the end of a snapshot (or of an annotation set's values).
    #[error("record {index} is out of range for {what} of {len} records")]
    OutOfRange {
        /// The index asked for.
        index: u64,
        /// The number of records.
        len: u64,
        /// What was read: `snapshot <id>` or `annotation set <set>/<version>`.
        what: String,
    },
    /// A token read ([`Dataset::stream`](crate::Dataset::stream)) of a
    /// snapshot that is not one stream: a shard of records, shards of different element
    /// types, or no shards.
    #[error("snapshot {snapshot} is not a token stream: {reason}")]
    NotAStream {
        /// The snapshot's id.
        snapshot: String,
        /// Why (naming the first shard at fault).
        reason: String,
    },
    /// A token read asked for another element type than the stream holds.
    #[error("the stream holds {stream} elements, read as {requested}")]
    ElementMismatch {
        /// The stream's element type name (`"u16"`, ...).
        stream: String,
        /// The element type asked for.
        requested: &'static str,
    },
    /// A token range past the end of a stream (or reversed).
    #[error("tokens {start}..{end} are out of range for a stream of {len} tokens")]
    TokensOutOfRange {
        /// The range's start.
        start: u64,
        /// The range's end.
        end: u64,
        /// Tokens in the stream.
        len: u64,
    },
    /// A record (or a document's metadata) could not be decoded into the type asked for.
    #[error("cannot decode record {index}: {source}")]
    Decode {
        /// The record's index.
        index: u64,
        /// The decoder's error.
        #[source]
        source: BoxError,
    },
    /// The runtime behind the synchronous API could not start
    /// ([`guideloom_io::bridge::Bridge::shared`]).
    #[error("cannot start the dataset runtime: {source}")]
    Runtime {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An invalid argument (a key, a name, an option).
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What is wrong.
        what: String,
    },
    /// A storage request failed (transport, permission, server error). Displayed with its
    /// cause first when the source chain tells one ([`guideloom_io::cause_of`]), then the
    /// failed request in short ([`guideloom_io::brief`]): `bucket does not exist
    /// (NoSuchBucket): list shards: GET http://host/bkt?list-type=2&prefix=shards%2F: 404 Not
    /// Found`.
    #[error("{}", storage_text(.key, .operation, .source))]
    Storage {
        /// The object involved (relative to the root), or a prefix for listings.
        key: String,
        /// The request (`"put"`, `"get"`, `"head"`, `"list"`, ...).
        operation: &'static str,
        /// The underlying error.
        #[source]
        source: BoxError,
    },
    /// A local file-system operation failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A shard could not be opened or read: the format layer's error, whatever part of the
    /// shard it concerns (footer, index, metadata, a record's checksum) or the transport
    /// failure beneath it. Match on the source ([`guideloom_format::Error::is_corrupt`]
    /// tells damage from transport).
    #[error("{}", named_once(format_args!("shard {key}"), .key, .source))]
    Shard {
        /// The shard (relative to the root).
        key: String,
        /// The format layer's error.
        #[source]
        source: Box<guideloom_format::Error>,
    },
    /// An ArrayRecord shard ([`ShardFormat::ArrayRecord`](crate::ShardFormat::ArrayRecord))
    /// could not be opened or read: the arrayrecord crate's error, whatever part of the file
    /// it concerns (postscript, footer, a chunk's hashes or codec) or the transport failure
    /// beneath it. The sibling of [`Error::Shard`] for native shards.
    #[error("{}", named_once(format_args!("ArrayRecord shard {key}"), .key, .source))]
    ArrayRecordShard {
        /// The shard (relative to the root).
        key: String,
        /// The arrayrecord crate's error.
        #[source]
        source: Box<guideloom_arrayrecord::Error>,
    },
    /// The byte-range IO layer failed while reading an object.
    #[error("{}", named_once(format_args!("read error on {key}"), .key, .source))]
    Read {
        /// The object read.
        key: String,
        /// The IO layer's error.
        #[source]
        source: guideloom_io::Error,
    },
}

/// [`Error::Storage`]'s text: the cause first when the chain tells one.
/// The store's error is given in short ([`guideloom_io::brief`]: the failed request, never
/// the server's raw response document).
fn storage_text(key: &str, operation: &str, source: &BoxError) -> String {
    let details = guideloom_io::brief(&**source);
    match guideloom_io::cause_of(&**source) {
        Some(cause) => format!("{cause}: {operation} {key}: {details}"),
        None => format!("storage error on {key} ({operation}): {details}"),
    }
}

/// `context: source`, or only `source` when it already names `key` (the format and IO
/// layers name the object they read, by its full location): each name once.
fn named_once(
    context: std::fmt::Arguments<'_>,
    key: &str,
    source: &dyn std::error::Error,
) -> String {
    let text = source.to_string();
    if guideloom_io::mentions(&text, key) {
        text
    } else {
        format!("{context}: {text}")
    }
}

fn size_text(size: Option<u64>, limit: u64) -> String {
    match size {
        Some(size) => size.to_string(),
        None => format!("more than {limit}"),
    }
}

fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl Error {
    /// Builds an [`Error::Io`], or [`Error::DiskFull`] naming the directory when the OS
    /// error is ENOSPC or EDQUOT.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if is_disk_full(&source) {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| path.clone(), PathBuf::from);
            return Error::DiskFull { dir, path, source };
        }
        Error::Io { path, source }
    }

    /// Builds an [`Error::Io`] about an unnamed temporary file in `dir` (a spooled shard),
    /// or [`Error::DiskFull`] naming `dir` when the OS error is ENOSPC or EDQUOT.
    pub(crate) fn io_in(dir: &std::path::Path, source: std::io::Error) -> Self {
        if is_disk_full(&source) {
            return Error::DiskFull {
                dir: dir.to_owned(),
                path: dir.to_owned(),
                source,
            };
        }
        Error::Io {
            path: dir.to_owned(),
            source,
        }
    }

    /// Builds an [`Error::Storage`].
    pub fn storage(
        key: impl Into<String>,
        operation: &'static str,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Storage {
            key: key.into(),
            operation,
            source: source.into(),
        }
    }

    pub(crate) fn corrupt(key: impl Into<String>, what: impl Into<String>) -> Self {
        Error::Corrupt {
            key: key.into(),
            what: what.into(),
        }
    }

    /// The format crate's error about the shard at `key`: every failure of a shard's bytes,
    /// whichever part (footer, index, metadata, a record) and wherever it is read. An object
    /// replaced behind its reader ([`guideloom_io::Error::Changed`]) is
    /// [`Error::Verification`] of its `"entity tag"`, as [`Error::read`] makes it.
    pub(crate) fn shard(key: &str, source: guideloom_format::Error) -> Self {
        match source {
            guideloom_format::Error::Io(io) if io.is_changed() => Error::read(key, io),
            source => Error::Shard {
                key: key.to_owned(),
                source: Box::new(source),
            },
        }
    }

    /// The arrayrecord crate's error about the ArrayRecord shard at `key` (a replaced
    /// object: as [`shard`](Self::shard)).
    pub(crate) fn array_record_shard(key: &str, source: guideloom_arrayrecord::Error) -> Self {
        match source {
            guideloom_arrayrecord::Error::Io { source: io } if io.is_changed() => {
                Error::read(key, io)
            }
            source => Error::ArrayRecordShard {
                key: key.to_owned(),
                source: Box::new(source),
            },
        }
    }

    /// The IO layer's error reading the object at `key`: [`Error::Read`], except that an
    /// object replaced since its reader pinned it ([`guideloom_io::Error::Changed`]) is
    /// [`Error::Verification`] of its `"entity tag"`, the kind every other sign of a
    /// replaced shard has.
    pub(crate) fn read(key: &str, source: guideloom_io::Error) -> Self {
        match source {
            guideloom_io::Error::Changed { pinned, found, .. } => Error::Verification {
                key: key.to_owned(),
                what: "entity tag",
                expected: pinned,
                actual: found.map(String::from).unwrap_or_else(|| {
                    "another version (the store refused If-Match: the object was replaced \
                     after this reader opened it)"
                        .to_owned()
                }),
            },
            source => Error::Read {
                key: key.to_owned(),
                source,
            },
        }
    }

    /// What went wrong, in one word ([`ErrorKind`], whose docs give the rule). A shard's error
    /// ([`Error::Shard`], [`Error::ArrayRecordShard`]) and a read's ([`Error::Read`]) have the
    /// kind of their source (damage is [`Corrupt`](ErrorKind::Corrupt), a timeout beneath
    /// [`Timeout`](ErrorKind::Timeout)); a local OS error ([`Error::Io`]) the kind of its
    /// `std::io::ErrorKind`; a failed storage request ([`Error::Storage`]) is
    /// [`Remote`](ErrorKind::Remote) unless its cause is of the transport class
    /// ([`ErrorKind::of_remote`]: refused credentials, a timeout). Every other variant has its
    /// own.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::PublicationCollision { .. } => ErrorKind::Collision,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Corrupt { .. } | Error::LogGap { .. } => ErrorKind::Corrupt,
            Error::Verification { .. } => ErrorKind::VerificationFailed,
            Error::DatasetMismatch { .. }
            | Error::AnnotationSnapshotMismatch { .. }
            | Error::CountMismatch { .. }
            | Error::NotAStream { .. }
            | Error::ElementMismatch { .. }
            | Error::SchemaChange { .. } => ErrorKind::Mismatch,
            Error::TokensOutOfRange { .. } => ErrorKind::OutOfRange,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Runtime { .. } => ErrorKind::Other,
            Error::CasExhausted { .. } | Error::Collected { .. } => ErrorKind::Conflict,
            Error::SnapshotExpired { .. } => ErrorKind::NotFound,
            Error::ConditionalWritesUnsupported { .. }
            | Error::MountedBucketCannotAnnotate { .. }
            | Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::ShardTooLarge { .. } | Error::TooLarge { .. } | Error::StagingBudget { .. } => {
                ErrorKind::TooLarge
            }
            Error::ReadOnlyRoot { .. } => ErrorKind::ReadOnly,
            Error::RefusedFile { .. } => ErrorKind::RefusedFile,
            Error::DiskFull { .. } => ErrorKind::DiskFull,
            Error::AwsProfile { .. } | Error::InvalidUri { .. } | Error::InvalidArgument { .. } => {
                ErrorKind::InvalidArgument
            }
            Error::OutOfRange { .. } => ErrorKind::OutOfRange,
            Error::Storage { source, .. } => ErrorKind::of_remote(&**source),
            Error::Io { source, .. } => source.kind().into(),
            Error::Shard { source, .. } => source.kind(),
            Error::ArrayRecordShard { source, .. } => source.kind(),
            Error::Read { source, .. } => source.kind(),
        }
    }

    /// `true` for the errors of a shard's own bytes or of reading them ([`Error::Shard`],
    /// [`Error::ArrayRecordShard`]), whichever format the shard has.
    pub fn is_shard_error(&self) -> bool {
        matches!(self, Error::Shard { .. } | Error::ArrayRecordShard { .. })
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Error::InvalidArgument { what: what.into() }
    }

    /// `true` for [`Error::NotFound`]: this crate's own "the object does not exist" (a
    /// shard's or a read's not-found error beneath [`Error::Shard`] or [`Error::Read`] has
    /// kind [`ErrorKind::NotFound`] too, but is not this).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// `true` for [`Error::PublicationCollision`].
    pub fn is_collision(&self) -> bool {
        matches!(self, Error::PublicationCollision { .. })
    }

    /// Whether the outcome of the failed request is unknown: it may or may not have taken
    /// effect (timeouts, dropped connections, server errors). Create-only writes resolve
    /// this by reading the object back.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Error::Storage { .. })
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
