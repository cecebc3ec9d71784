//! Rounds that alternate the sides of a comparison, and what is read from them.
//!
//! Two (or three) sides measured one after the other see the machine's drift
//! unevenly; measured in rounds whose order is reversed every other round (A B,
//! B A, A B, …), a steady drift favours no side.

/// The order the sides `0..sides` run in, round after round for `rounds` rounds:
/// `0 1 … n`, then `n … 1 0`, and so on.
pub fn alternating(sides: usize, rounds: usize) -> impl Iterator<Item = usize> {
    (0..rounds).flat_map(move |round| {
        (0..sides).map(move |i| if round % 2 == 0 { i } else { sides - 1 - i })
    })
}

/// The median of `values` (the upper one of an even count); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// The lowest and highest ratio of `a` to `b`, round by round.
pub fn ratio_range(a: &[f64], b: &[f64]) -> (f64, f64) {
    let rounds: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    let low = rounds.iter().copied().fold(f64::INFINITY, f64::min);
    let high = rounds.iter().copied().fold(0.0, f64::max);
    (low, high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_round_runs_backwards() {
        let order: Vec<usize> = alternating(2, 4).collect();
        assert_eq!(order, [0, 1, 1, 0, 0, 1, 1, 0]);
        let order: Vec<usize> = alternating(3, 3).collect();
        assert_eq!(order, [0, 1, 2, 2, 1, 0, 0, 1, 2]);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_upper_one() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&[]), 0.0);
    }
}
