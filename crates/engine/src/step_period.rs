//! Finding the step length of a loop that never syncs.
//!
//! Fused Eager cuts a graph at a step boundary when its op sequence repeats
//! the previous graph's. A loop with no host read and no optimizer step
//! (an inference or generation loop feeding its own outputs) gives no such
//! boundary. If its graph grew to the size bound, it would be cut wherever
//! the bound falls, mid-step, at a different point each time, so every cut
//! would be a new program to compile. The graph's tail tells the loop's
//! period instead: if its last 2p ops are two copies of the same p ops, the
//! next p ops will be that copy again, and cutting every p ops from there
//! gives the same program every time.
use std::hash::{Hash, Hasher};

/// The smallest period `p >= min` such that the last `2p` items of `ops`
/// are two equal halves, if any.
pub fn tail_period<T: Hash + Eq>(ops: &[T], min: usize) -> Option<usize> {
    let mut trace = LoopTrace::default();
    for op in ops {
        let mut h = crate::cache::StableHasher::new();
        op.hash(&mut h);
        trace.push(h.finish());
    }
    trace.tail_period(min)
}

/// Items (by hash) of a sequence that grows one at a time, with polynomial
/// prefix hashes (mod 2^64) kept as it grows: comparing two ranges is O(1),
/// so a check for a period costs O(n) integer operations and no rehashing
/// (Fused Eager checks every few ops of a growing graph). Two items are
/// taken as equal when their 64-bit hashes are.
#[derive(Default)]
pub struct LoopTrace {
    items: Vec<u64>,
    prefix: Vec<u64>,
    pow: Vec<u64>,
}

const BASE: u64 = 0x100_0000_01b3;

impl LoopTrace {
    pub fn push(&mut self, item: u64) {
        if self.prefix.is_empty() {
            self.prefix.push(0);
            self.pow.push(1);
        }
        let (h, p) = (self.prefix[self.prefix.len() - 1], self.pow[self.pow.len() - 1]);
        self.prefix.push(h.wrapping_mul(BASE).wrapping_add(item | 1));
        self.pow.push(p.wrapping_mul(BASE));
        self.items.push(item);
    }

    /// The smallest period `p >= min` such that the last `2p` items are
    /// two equal halves, if any (a match of range hashes is confirmed item
    /// by item, so a collision between ranges costs time only).
    pub fn tail_period(&self, min: usize) -> Option<usize> {
        let n = self.items.len();
        if min == 0 || n < 2 * min {
            return None;
        }
        let range = |a: usize, b: usize| self.prefix[b].wrapping_sub(self.prefix[a].wrapping_mul(self.pow[b - a]));
        (min..=n / 2).find(|&p| {
            range(n - p, n) == range(n - 2 * p, n - p) && self.items[n - p..] == self.items[n - 2 * p..n - p]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::tail_period;

    fn seq(prefix: &[&str], body: &[&str], repeats: usize, partial: usize) -> Vec<String> {
        let mut v: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
        for _ in 0..repeats {
            v.extend(body.iter().map(|s| s.to_string()));
        }
        v.extend(body[..partial].iter().map(|s| s.to_string()));
        v
    }

    #[test]
    fn finds_the_loop_body_after_a_prefix_and_mid_step() {
        let body = ["mm", "tanh", "mul", "add", "sum", "div", "exp"];
        let ops = seq(&["randn", "clone"], &body, 10, 3);
        // The tail is periodic with the body's length, starting mid-body.
        assert_eq!(tail_period(&ops, 5), Some(7));
        // A period is only reported if it is at least `min` long: 14 is
        // the smallest multiple of 7 that qualifies.
        assert_eq!(tail_period(&ops, 8), Some(14));
    }

    #[test]
    fn items_that_also_name_what_they_read_tell_layers_from_steps() {
        // Two layers of a model look alike by op names, but read their own
        // weights (1, 2); the steps of a loop over the model read the same.
        let layer = |w: u64| vec![("mm", vec![w]), ("add", vec![]), ("tanh", vec![])];
        let step: Vec<(&str, Vec<u64>)> = [layer(1), layer(2), vec![("argmax", vec![])]].concat();
        let one_step = step.clone();
        assert_eq!(tail_period(&one_step[..6], 3), None);
        let loop3: Vec<_> = [step.clone(), step.clone(), step].concat();
        assert_eq!(tail_period(&loop3, 3), Some(7));
    }

    #[test]
    fn no_period_without_two_full_copies() {
        let body = ["a", "b", "c", "d"];
        assert_eq!(tail_period(&seq(&["x"], &body, 1, 3), 2), None);
        let distinct: Vec<String> = (0..100).map(|i| format!("op{i}")).collect();
        assert_eq!(tail_period(&distinct, 4), None);
        assert_eq!(tail_period::<String>(&[], 4), None);
    }
}
