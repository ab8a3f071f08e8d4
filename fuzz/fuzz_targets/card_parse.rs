//! A dataset card's two objects as `Root::card` parses them (`Card::parse`): `README.md`
//! and `card.json`. The first two input bytes (little-endian) say how many of the
//! following bytes are the README (cut at the input's end); the rest is `card.json`.
//!
//! Whatever the bytes: `Ok` or a typed error, never a panic. A card that parses has the
//! README's bytes exactly, no split with an empty name or range, and encodes back
//! (`to_bytes`) to objects that parse to an equal card, its README byte for byte.
#![no_main]

use guideloom_publish::{Card, Error, Split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let rest = &data[2..];
    let (readme, json) = rest.split_at(split.min(rest.len()));
    match Card::parse("fuzz", readme, json) {
        Ok(card) => {
            assert_eq!(card.readme.as_bytes(), readme);
            for (name, s) in &card.splits {
                assert!(!name.is_empty());
                if let Split::Range { start, end } = s {
                    assert!(start < end);
                }
            }
            let (r, j) = card.to_bytes().expect("a parsed card encodes");
            assert_eq!(&r[..], readme);
            assert_eq!(Card::parse("fuzz", &r, &j).expect("its own bytes parse"), card);
        }
        Err(Error::Corrupt { key, .. }) => {
            assert!(key == "cards/fuzz/README.md" || key == "cards/fuzz/card.json", "{key}");
        }
        Err(e) => panic!("not a typed card error: {e:?}"),
    }
});
