//! The interleave of a weighted mixture: which source each global position belongs to, and
//! which of that source's samples it is. Pure integer arithmetic, specified bit for bit in
//! `docs/loader.md` ("Weighted mixtures").
//!
//! A phase (constant weights) splits its positions between sources with a binary tree of
//! two-way splits: a node with weight `T` whose left child has weight `A` sends the first
//! `x` positions it sees `floor((x·A + floor(T/2)) / T)` to the left, the rest to the right.
//! A position is located by walking from the root to a leaf, so position `p` costs
//! O(depth) whatever `p` is, and nothing is materialised.

use std::cmp::Ordering;

/// Weight units of a float weight: `floor(w / max · 2^52 + 0.5)`, so the largest weight is
/// `2^52` units and any ratio is kept to about 2⁻⁵² (`max` is the phase's largest weight).
pub(crate) const UNIT_SCALE: f64 = 4_503_599_627_370_496.0; // 2^52

/// The most sources a mixture takes: keeps every unit sum below 2^63, so that
/// `x · A + floor(T / 2)` fits in 128 bits for any 64-bit position `x`.
pub(crate) const MAX_SOURCES: usize = 2048;

/// The integer weights of one phase, from float weights (finite, not negative, one positive;
/// checked by the caller). Exact for the float inputs: `w / max` and the scaling are exact
/// or correctly rounded IEEE-754 operations, reproduced by any language's doubles.
pub(crate) fn units(weights: &[f64]) -> Vec<u64> {
    let max = weights.iter().copied().fold(0.0f64, f64::max);
    weights
        .iter()
        .map(|&w| {
            // In 0..=2^52 + 0.5: the cast is exact after floor.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let u = (w / max * UNIT_SCALE + 0.5).floor() as u64;
            u
        })
        .collect()
}

/// One node of a split tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// A source.
    Leaf(usize),
    /// A two-way split: `total` units, `left_units` of them in `left`.
    Split {
        total: u64,
        left_units: u64,
        left: usize,
        right: usize,
    },
}

/// The split tree of one phase: the sources with positive units, in index order, halved by
/// weight at each node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitTree {
    nodes: Vec<Node>,
    /// Per source: the path from the root as (node, went left), empty for a source with no
    /// units in this phase. Used to count a source's positions before `x`.
    paths: Vec<Vec<(usize, bool)>>,
}

impl SplitTree {
    /// The tree of `units` (at least one positive; their sum below 2^64).
    pub(crate) fn new(units: &[u64]) -> Self {
        let active: Vec<usize> = (0..units.len()).filter(|&s| units[s] > 0).collect();
        let mut tree = SplitTree {
            nodes: Vec::with_capacity(2 * active.len()),
            paths: vec![Vec::new(); units.len()],
        };
        tree.build(units, &active);
        for &s in &active {
            tree.paths[s] = tree.path_to(s);
        }
        tree
    }

    /// Builds the node of `list` (non-empty) and returns its index.
    fn build(&mut self, units: &[u64], list: &[usize]) -> usize {
        let at = self.nodes.len();
        if let [only] = list {
            self.nodes.push(Node::Leaf(*only));
            return at;
        }
        self.nodes.push(Node::Leaf(usize::MAX)); // replaced below
        let total: u64 = list.iter().map(|&s| units[s]).sum();
        let m = balanced_cut(units, list, total);
        let left_units = list[..m].iter().map(|&s| units[s]).sum();
        let left = self.build(units, &list[..m]);
        let right = self.build(units, &list[m..]);
        self.nodes[at] = Node::Split {
            total,
            left_units,
            left,
            right,
        };
        at
    }

    fn path_to(&self, source: usize) -> Vec<(usize, bool)> {
        let mut path = Vec::new();
        let mut at = 0;
        loop {
            match &self.nodes[at] {
                Node::Leaf(_) => return path,
                Node::Split { left, right, .. } => {
                    let go_left = self.contains(*left, source);
                    path.push((at, go_left));
                    at = if go_left { *left } else { *right };
                }
            }
        }
    }

    fn contains(&self, node: usize, source: usize) -> bool {
        match &self.nodes[node] {
            Node::Leaf(s) => *s == source,
            Node::Split { left, right, .. } => {
                self.contains(*left, source) || self.contains(*right, source)
            }
        }
    }

    /// The source of the `x`-th position of the phase, and how many positions of that
    /// source come before it in the phase.
    pub(crate) fn locate(&self, mut x: u64) -> (usize, u64) {
        let mut at = 0;
        loop {
            match &self.nodes[at] {
                Node::Leaf(s) => return (*s, x),
                Node::Split {
                    total,
                    left_units,
                    left,
                    right,
                } => {
                    let before = left_before(x, *left_units, *total);
                    let after = left_before(x + 1, *left_units, *total);
                    if after > before {
                        x = before;
                        at = *left;
                    } else {
                        x -= before;
                        at = *right;
                    }
                }
            }
        }
    }

    /// How many of the first `x` positions of the phase belong to `source`.
    pub(crate) fn count_before(&self, source: usize, mut x: u64) -> u64 {
        let path = &self.paths[source];
        if path.is_empty() {
            // The only source, or one without units.
            return if self.nodes.len() == 1 && self.nodes[0] == Node::Leaf(source) {
                x
            } else {
                0
            };
        }
        for &(node, went_left) in path {
            let Node::Split {
                total, left_units, ..
            } = &self.nodes[node]
            else {
                unreachable!("a path holds splits only")
            };
            let before = left_before(x, *left_units, *total);
            x = if went_left { before } else { x - before };
        }
        x
    }

    /// The proven bound on how far `source`'s count in any window of `m` consecutive
    /// positions of the phase is from `m · share`: `Σ units[s] / W(v)` over the nodes `v`
    /// below the root on its path, itself included (`W` a node's units). Each split keeps
    /// a child's count in any window of its parent's positions within 1 of its share, and
    /// that error reaches the leaf scaled by the leaf's share of the child. 1 for a source
    /// split off at the root (two sources: both).
    #[cfg(test)]
    pub(crate) fn window_bound(&self, source: usize) -> f64 {
        let Some(&(last, went_left)) = self.paths[source].last() else {
            return 0.0;
        };
        let units = self.child_units(last, went_left);
        #[allow(clippy::cast_precision_loss)]
        self.paths[source]
            .iter()
            .map(|&(node, left)| units as f64 / self.child_units(node, left) as f64)
            .sum()
    }

    #[cfg(test)]
    fn child_units(&self, node: usize, left: bool) -> u64 {
        match &self.nodes[node] {
            Node::Split {
                total, left_units, ..
            } => {
                if left {
                    *left_units
                } else {
                    total - left_units
                }
            }
            Node::Leaf(_) => 0,
        }
    }

    /// The tree's depth at `source` (splits from the root to its leaf).
    #[cfg(test)]
    pub(crate) fn depth(&self, source: usize) -> usize {
        self.paths[source].len()
    }
}

/// How many of a node's first `x` positions go left: `floor((x·a + floor(t/2)) / t)`.
/// `x < 2^64`, `a <= t < 2^64`: the product and the sum fit in 128 bits.
fn left_before(x: u64, a: u64, t: u64) -> u64 {
    let v = (u128::from(x) * u128::from(a) + u128::from(t / 2)) / u128::from(t);
    // <= x, so it fits.
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Where to cut `list` (length >= 2): the `m` in `1..len` with `|2·left(m) − total|` least,
/// the smallest such `m` on a tie.
fn balanced_cut(units: &[u64], list: &[usize], total: u64) -> usize {
    let mut best = (1usize, u128::MAX);
    let mut left = 0u128;
    for m in 1..list.len() {
        left += u128::from(units[list[m - 1]]);
        let gap = (2 * left).abs_diff(u128::from(total));
        if gap.cmp(&best.1) == Ordering::Less {
            best = (m, gap);
        }
    }
    best.0
}

#[cfg(test)]
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
mod tests {
    use super::*;

    /// Every position of a phase goes to exactly one source and the counts agree with
    /// `count_before`.
    fn check_consistent(units: &[u64], len: u64) {
        let tree = SplitTree::new(units);
        let mut seen = vec![0u64; units.len()];
        for x in 0..len {
            let (s, j) = tree.locate(x);
            assert_eq!(j, seen[s], "position {x} of {units:?}");
            seen[s] += 1;
            for (t, &c) in seen.iter().enumerate() {
                assert_eq!(tree.count_before(t, x + 1), c);
            }
        }
    }

    #[test]
    fn positions_are_split_exactly() {
        check_consistent(&[1], 10);
        check_consistent(&[3, 1], 40);
        check_consistent(&[5, 0, 3, 2], 100);
        check_consistent(&[1, 1, 1, 1, 1, 1, 1], 70);
        check_consistent(&[1 << 52, 3 << 50, 7, 1 << 40], 500);
    }

    #[test]
    fn integer_units_give_exact_rounds() {
        // Counts as units: each round of sum(units) positions has exactly those counts.
        let units = [7u64, 2, 11, 5];
        let tree = SplitTree::new(&units);
        let round: u64 = units.iter().sum();
        for r in 0..5 {
            for (s, &u) in units.iter().enumerate() {
                assert_eq!(tree.count_before(s, r * round), r * u);
            }
        }
    }

    #[test]
    fn the_cut_balances_weight() {
        let tree = SplitTree::new(&[8, 1, 1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(tree.depth(0), 1, "the heavy source splits off at the root");
        let tree = SplitTree::new(&[1, 1, 1, 1]);
        assert!((0..4).all(|s| tree.depth(s) == 2));
    }

    /// The largest `|count − m · share|` of each source over windows of `m` positions in the
    /// first `len` positions, for several `m`.
    fn window_errors(units: &[u64], len: u64) -> Vec<f64> {
        let tree = SplitTree::new(units);
        let total: u64 = units.iter().sum();
        let mut prefix = vec![vec![0u64]; units.len()];
        for x in 0..len {
            let (s, _) = tree.locate(x);
            for (t, p) in prefix.iter_mut().enumerate() {
                let last = p[p.len() - 1];
                p.push(last + u64::from(t == s));
            }
        }
        let mut worst = vec![0.0f64; units.len()];
        for m in [1u64, 7, 64, 1000, 16_000] {
            for (s, p) in prefix.iter().enumerate() {
                let share = units[s] as f64 / total as f64;
                for x in (0..len.saturating_sub(m)).step_by(3) {
                    let count = p[(x + m) as usize] - p[x as usize];
                    worst[s] = worst[s].max((count as f64 - m as f64 * share).abs());
                }
            }
        }
        worst
    }

    #[test]
    fn every_window_keeps_within_the_proven_bound() {
        let cases: [&[f64]; 6] = [
            &[0.7, 0.3],
            &[0.5, 0.3, 0.2],
            &[1.0, 1.0, 1.0],
            &[0.6, 0.25, 0.1, 0.05],
            &[0.45, 0.65, 0.79, 0.09, 0.03, 0.84, 0.43, 0.76],
            &[0.999, 0.001],
        ];
        for weights in cases {
            let u = units(weights);
            let tree = SplitTree::new(&u);
            for (s, err) in window_errors(&u, 40_000).into_iter().enumerate() {
                let bound = tree.window_bound(s);
                assert!(
                    err < bound,
                    "{weights:?}: source {s} off by {err}, bound {bound}"
                );
                if weights.len() == 2 {
                    assert!(bound <= 1.0, "two sources: within one sample");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_units_split_every_position_once(
            units in proptest::collection::vec(0u64..1000, 1..7),
            len in 0u64..600,
        ) {
            proptest::prop_assume!(units.iter().any(|&u| u > 0));
            check_consistent(&units, len);
        }
    }

    #[test]
    fn float_weights_become_units() {
        assert_eq!(units(&[1.0, 0.5, 0.0]), [1 << 52, 1 << 51, 0]);
        assert_eq!(units(&[0.7, 0.3])[0], 1 << 52);
    }
}
