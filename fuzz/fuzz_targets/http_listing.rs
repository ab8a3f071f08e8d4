//! Drives the parser of HTTP directory listings (guideloom-publish's `list` on an HTTP root
//! declared to list: nginx `autoindex_format json`, Caddy browse) over arbitrary bytes.
//!
//! Input: one byte picking the directory (the root, `log`, or a nested `shards/w`), then the
//! body. Whatever the body, parsing returns entries or an error, never panics; every entry is
//! a valid key (`key_problem` is `None`) directly below the directory (its prefix, then one
//! segment without `/`); there are no more entries than the body has `{`s (each is an
//! object of the array); and parsing is deterministic.
#![no_main]

use guideloom_publish::fuzzing::{key_problem, parse_listing};
use libfuzzer_sys::fuzz_target;

const DIRS: [&str; 3] = ["", "log", "shards/w"];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let dir = DIRS[usize::from(pick) % DIRS.len()];
    let Ok(listed) = parse_listing(dir, body) else {
        return;
    };
    assert_eq!(parse_listing(dir, body), Ok(listed.clone()));
    let objects = body.iter().filter(|&&b| b == b'{').count();
    assert!(listed.len() <= objects, "{} entries from {objects} objects", listed.len());
    for (key, _) in &listed {
        assert_eq!(key_problem(key), None, "{key:?}");
        let name = if dir.is_empty() {
            key.as_str()
        } else {
            key.strip_prefix(dir)
                .and_then(|k| k.strip_prefix('/'))
                .unwrap_or_else(|| panic!("{key:?} is not below {dir:?}"))
        };
        assert!(!name.is_empty() && !name.contains('/'), "{key:?} below {dir:?}");
    }
});
