use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::index::encode_entry;
use crate::spec::HEADER_LEN;

/// An index of records of the given sizes.
fn index_of(sizes: &[u64]) -> Index {
    let mut end = HEADER_LEN;
    let mut raw = Vec::new();
    for &s in sizes {
        end += s;
        raw.extend_from_slice(&encode_entry(end, 0));
    }
    Index::parse("t", Bytes::from(raw), end).unwrap()
}

/// (shard, local) of every global index, by walking the shards one record at a time.
fn naive_positions(counts: &[u64]) -> Vec<Located> {
    let mut out = Vec::new();
    for (shard, &n) in counts.iter().enumerate() {
        for local in 0..n {
            out.push(Located { shard, local });
        }
    }
    out
}

/// The batching rule written out as a loop: add records while the next one still ends
/// within the budget.
fn naive_run_len(sizes: &[u64], first: u64, end: u64, budget: RunBudget) -> u64 {
    let len = sizes.len() as u64;
    if first >= end {
        return 0;
    }
    if first >= len {
        return end - first;
    }
    let stop = end.min(len);
    let size = |i: u64| sizes[usize::try_from(i).unwrap()];
    let mut bytes = size(first);
    let mut count = 1;
    while first + count < stop && count < budget.max_records.max(1) {
        bytes += size(first + count);
        if bytes > budget.max_bytes {
            break;
        }
        count += 1;
    }
    count
}

#[test]
fn empty_tables() {
    for table in [
        ShardTable::default(),
        ShardTable::from_counts([]).unwrap(),
        ShardTable::from_counts([0, 0]).unwrap(),
    ] {
        assert!(table.is_empty());
        assert_eq!(table.len(), 0);
        assert_eq!(table.locate(0), None);
        assert_eq!(table.group(&[]), Ok(vec![]));
        assert_eq!(table.group(&[0]), Err(0));
        assert_eq!(table.runs(0..10).count(), 0);
    }
    assert_eq!(ShardTable::default().shard_count(), 0);
    assert_eq!(ShardTable::from_counts([0, 0]).unwrap().shard_count(), 2);
}

#[test]
fn empty_shards_are_skipped() {
    let table = ShardTable::from_counts([0, 2, 0, 0, 3, 0]).unwrap();
    assert_eq!(table.starts(), &[0, 0, 2, 2, 2, 5, 5]);
    assert_eq!(table.locate(0), Some(Located { shard: 1, local: 0 }));
    assert_eq!(table.locate(2), Some(Located { shard: 4, local: 0 }));
    assert_eq!(table.locate(4), Some(Located { shard: 4, local: 2 }));
    assert_eq!(table.locate(5), None);
    assert_eq!(table.bounds(3), 2..2);
    assert_eq!(table.bounds(6), 5..5, "past the end: empty at the end");
    assert_eq!(table.shard_len(4), 3);
    let runs: Vec<Run> = table.runs(0..100).collect();
    assert_eq!(
        runs,
        [
            Run {
                shard: 1,
                first: 0,
                count: 2
            },
            Run {
                shard: 4,
                first: 0,
                count: 3
            }
        ]
    );
    assert_eq!(table.global(&runs[1]), 2..5);
}

#[test]
fn overflow_is_refused_with_the_shard() {
    let max = ShardTable::MAX_LEN;
    assert_eq!(ShardTable::from_counts([max]).unwrap().len(), max);
    let err = ShardTable::from_counts([1, max - 1, 1]).unwrap_err();
    assert!(
        matches!(err, Error::TableOverflow { shard: 2, limit } if limit == max),
        "{err:?}"
    );
    let err = ShardTable::from_counts([u64::MAX]).unwrap_err();
    assert!(matches!(err, Error::TableOverflow { shard: 0, .. }));
    assert!(err.to_string().contains("shard 0"), "{err}");
}

#[test]
fn group_keeps_first_appearance_and_batch_order() {
    let table = ShardTable::from_counts([3, 0, 3, 3]).unwrap();
    let groups = table.group(&[7, 0, 3, 8, 2, 7]).unwrap();
    let shards: Vec<usize> = groups.iter().map(|g| g.shard).collect();
    assert_eq!(shards, [3, 0, 2]);
    assert_eq!(groups[0].positions, [0, 3, 5]);
    assert_eq!(groups[0].locals, [1, 2, 1]);
    assert_eq!(groups[1].locals, [0, 2]);
    assert_eq!(table.group(&[0, 10, 9, 11]), Err(10));
}

#[test]
fn run_len_follows_the_byte_and_record_budget() {
    let index = index_of(&[10, 10, 10, 50, 0, 0, 10]);
    let b = RunBudget::new(25, 100);
    assert_eq!(
        b.run_len(&index, 0, 7),
        2,
        "10 + 10 fit in 25, a third does not"
    );
    assert_eq!(
        b.run_len(&index, 3, 7),
        1,
        "a record over budget goes alone"
    );
    assert_eq!(b.run_len(&index, 4, 7), 3, "empty records are free");
    assert_eq!(b.run_len(&index, 0, 1), 1, "never past `end`");
    assert_eq!(b.run_len(&index, 5, 5), 0);
    assert_eq!(RunBudget::new(1 << 20, 2).run_len(&index, 0, 7), 2);
    assert_eq!(RunBudget::new(1 << 20, 0).run_len(&index, 0, 7), 1);
    // A table promising more records than the shard holds: the rest as one run.
    assert_eq!(b.run_len(&index, 7, 9), 2);
    let runs: Vec<Run> = plan_runs(
        &index,
        Run {
            shard: 4,
            first: 5,
            count: 4,
        },
        b,
    )
    .collect();
    assert_eq!(
        runs,
        [
            Run {
                shard: 4,
                first: 5,
                count: 2
            },
            Run {
                shard: 4,
                first: 7,
                count: 2
            }
        ]
    );
}

#[test]
fn default_budget_is_one_mebibyte_or_4096_records() {
    let b = RunBudget::default();
    assert_eq!((b.max_bytes, b.max_records), (1 << 20, 4096));
    let index = index_of(&vec![1; 10_000]);
    assert_eq!(b.run_len(&index, 0, 10_000), 4096);
    let index = index_of(&vec![1 << 10; 2000]);
    assert_eq!(b.run_len(&index, 0, 2000), 1024);
}

/// `group`: every index once, in its group, groups ordered by first appearance; the first
/// index past the end refused.
fn check_group(
    table: &ShardTable,
    naive: &[Located],
    indices: &[u64],
) -> Result<(), proptest::test_runner::TestCaseError> {
    let len = naive.len() as u64;
    match table.group(indices) {
        Err(bad) => {
            let first_bad = indices.iter().copied().find(|&i| i >= len);
            prop_assert_eq!(Some(bad), first_bad);
        }
        Ok(groups) => {
            prop_assert!(indices.iter().all(|&i| i < len));
            let mut order = Vec::new();
            for &i in indices {
                let s = naive[usize::try_from(i).unwrap()].shard;
                if !order.contains(&s) {
                    order.push(s);
                }
            }
            prop_assert_eq!(groups.iter().map(|g| g.shard).collect::<Vec<_>>(), order);
            let mut seen = vec![false; indices.len()];
            for g in &groups {
                prop_assert_eq!(g.positions.len(), g.locals.len());
                prop_assert!(g.positions.windows(2).all(|w| w[0] < w[1]));
                for (&pos, &local) in g.positions.iter().zip(&g.locals) {
                    prop_assert!(!seen[pos]);
                    seen[pos] = true;
                    let at = naive[usize::try_from(indices[pos]).unwrap()];
                    prop_assert_eq!(
                        at,
                        Located {
                            shard: g.shard,
                            local
                        }
                    );
                }
            }
            prop_assert!(seen.iter().all(|&s| s));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn table_agrees_with_a_linear_scan(
        // Up to 40 shards, so `group` passes its scan limit (16 groups) and uses its map.
        counts in proptest::collection::vec(prop_oneof![Just(0u64), 0u64..6], 0..40),
        indices in proptest::collection::vec(0u64..120, 0..80),
        range in (0u64..120, 0u64..125),
    ) {
        let table = ShardTable::from_counts(counts.iter().copied()).unwrap();
        let naive = naive_positions(&counts);
        let len = naive.len() as u64;
        prop_assert_eq!(table.len(), len);
        prop_assert_eq!(table.shard_count(), counts.len());
        for (shard, &n) in counts.iter().enumerate() {
            let b = table.bounds(shard);
            prop_assert_eq!(b.end - b.start, n);
            prop_assert_eq!(b.start, counts[..shard].iter().sum::<u64>());
        }
        for i in 0..len + 3 {
            let want = usize::try_from(i).ok().and_then(|i| naive.get(i)).copied();
            prop_assert_eq!(table.locate(i), want);
        }

        check_group(&table, &naive, &indices)?;

        // runs: the range's records in order, one run per non-empty shard touched.
        let (a, b) = range;
        let from_runs: Vec<Located> = table
            .runs(a..b)
            .inspect(|r| assert!(r.count > 0))
            .flat_map(|r| r.locals().map(move |local| Located { shard: r.shard, local }))
            .collect();
        let want: Vec<Located> = (a..b.min(len))
            .map(|i| naive[usize::try_from(i).unwrap()])
            .collect();
        prop_assert_eq!(from_runs, want);
        let shards: Vec<usize> = table.runs(a..b).map(|r| r.shard).collect();
        prop_assert!(shards.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn plan_runs_agrees_with_a_linear_scan(
        sizes in proptest::collection::vec(prop_oneof![Just(0u64), 0u64..40], 0..40),
        max_bytes in 0u64..100,
        max_records in 0u64..8,
        first in 0u64..45,
        count in 0u64..45,
    ) {
        let index = index_of(&sizes);
        let budget = RunBudget::new(max_bytes, max_records);
        let piece = Run { shard: 3, first, count };
        let mut next = first;
        for run in plan_runs(&index, piece, budget) {
            prop_assert_eq!(run.shard, 3);
            prop_assert_eq!(run.first, next);
            prop_assert_eq!(run.count, naive_run_len(&sizes, next, first + count, budget));
            next += run.count;
        }
        prop_assert_eq!(next, first + count, "the piece is covered exactly");
    }
}

proptest! {
    /// Many shards for a small batch: `group` scans the groups so far, then (past 16
    /// groups) uses its map instead of a table of one slot per shard.
    #[test]
    fn group_agrees_with_a_linear_scan_over_many_shards(
        counts in proptest::collection::vec(prop_oneof![Just(0u64), 1u64..3], 121..400),
        picks in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
    ) {
        let table = ShardTable::from_counts(counts.iter().copied()).unwrap();
        let naive = naive_positions(&counts);
        let len = naive.len() as u64;
        // Mostly valid indices, and one past the end now and then.
        let indices: Vec<u64> = picks.iter().map(|&p| p % (len + 1 + len / 20)).collect();
        prop_assert!(counts.len() > (indices.len() * 4).max(64));
        check_group(&table, &naive, &indices)?;
    }
}
