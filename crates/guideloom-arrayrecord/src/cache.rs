//! A small cache of decoded chunks, so neighbours in one group cost no read.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// The records of one decoded chunk.
pub(crate) type Records = Arc<Vec<Bytes>>;

/// Most recently used first; bounded by a chunk count and a byte total.
#[derive(Debug)]
pub(crate) struct ChunkCache {
    max_chunks: usize,
    max_bytes: u64,
    entries: Mutex<VecDeque<(usize, Records, u64)>>,
}

impl ChunkCache {
    pub(crate) fn new(max_chunks: usize, max_bytes: u64) -> Self {
        ChunkCache {
            max_chunks,
            max_bytes,
            entries: Mutex::new(VecDeque::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(usize, Records, u64)>> {
        // A panic elsewhere cannot leave the deque inconsistent: recover it.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Chunk `c`'s records, if cached (and marks them most recently used).
    pub(crate) fn get(&self, c: usize) -> Option<Records> {
        let mut entries = self.lock();
        let at = entries.iter().position(|(k, _, _)| *k == c)?;
        let entry = entries.remove(at)?;
        let records = Arc::clone(&entry.1);
        entries.push_front(entry);
        Some(records)
    }

    /// Caches chunk `c` (`bytes` decoded bytes), evicting the least recently used.
    pub(crate) fn insert(&self, c: usize, records: Records, bytes: u64) {
        if self.max_chunks == 0 || bytes > self.max_bytes {
            return;
        }
        let mut entries = self.lock();
        entries.retain(|(k, _, _)| *k != c);
        entries.push_front((c, records, bytes));
        let mut total: u64 = entries.iter().map(|e| e.2).sum();
        while entries.len() > self.max_chunks || total > self.max_bytes {
            match entries.pop_back() {
                Some(e) => total -= e.2,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(n: u8) -> Records {
        Arc::new(vec![Bytes::from(vec![n])])
    }

    #[test]
    fn evicts_least_recently_used_within_both_bounds() {
        let cache = ChunkCache::new(2, 100);
        cache.insert(1, recs(1), 10);
        cache.insert(2, recs(2), 10);
        assert!(cache.get(1).is_some()); // 1 is now the most recent
        cache.insert(3, recs(3), 10);
        assert!(cache.get(2).is_none());
        assert_eq!(cache.get(1).unwrap()[0][0], 1);
        cache.insert(4, recs(4), 95); // over the byte bound with anything else
        assert!(cache.get(1).is_none() && cache.get(3).is_none());
        assert!(cache.get(4).is_some());
        cache.insert(5, recs(5), 101); // larger than the cache: not kept
        assert!(cache.get(5).is_none());
        let off = ChunkCache::new(0, 100);
        off.insert(1, recs(1), 1);
        assert!(off.get(1).is_none());
    }
}
