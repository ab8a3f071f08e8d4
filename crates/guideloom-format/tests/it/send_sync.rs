//! Public types are `Send + Sync` (readers are shared across threads and tasks).

use guideloom_format::*;

fn send_sync<T: Send + Sync>() {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<Error>();
    send_sync::<SyncShard>();
    send_sync::<AsyncShard>();
    send_sync::<ShardWriter>();
    send_sync::<MemReader>();
    send_sync::<Elements<f32>>();
    send_sync::<CborFormat<std::rc::Rc<u8>>>();
}
