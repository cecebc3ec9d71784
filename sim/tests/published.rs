//! The port prints the seed's published output line for line, except the four
//! run-metadata lines (runtime, SQLite version, machine, run date).

const PUBLISHED: &str = include_str!("fixtures/published-output.txt");

/// The fixture's metadata lines, by label; the port prints its own values (and
/// `runtime:` for `node:`) at the same positions.
const METADATA: [(&str, &str); 4] = [
    ("node: ", "runtime: "),
    ("sqlite: ", "sqlite: "),
    ("machine: ", "machine: "),
    ("run date: ", "run date: "),
];

#[test]
fn output_matches_the_published_text() {
    let mut out = Vec::new();
    hookbox_sim::run(&mut out, &hookbox_sim::RunMeta::detect()).expect("the sim runs");
    let ours = String::from_utf8(out).expect("utf-8");
    let expected: Vec<&str> = PUBLISHED.lines().collect();
    let actual: Vec<&str> = ours.lines().collect();

    // the metadata lines sit right after `seed:`, in this order, in both texts
    let seed_at = expected
        .iter()
        .position(|l| l.starts_with("seed: "))
        .expect("seed line");
    for (i, (theirs, mine)) in METADATA.iter().enumerate() {
        let at = seed_at + 1 + i;
        assert!(
            expected[at].starts_with(theirs),
            "fixture line {}: {:?}",
            at + 1,
            expected[at]
        );
        assert!(
            actual.get(at).is_some_and(|l| l.starts_with(mine)),
            "output line {}: {:?}",
            at + 1,
            actual.get(at)
        );
    }
    let masked = seed_at + 1..seed_at + 1 + METADATA.len();

    let mismatch = (0..expected.len().max(actual.len()))
        .filter(|i| !masked.contains(i))
        .find(|&i| expected.get(i) != actual.get(i));
    if let Some(first) = mismatch {
        let from = first.saturating_sub(3);
        let to = (first + 12).min(expected.len().max(actual.len()));
        let mut diff = format!(
            "first difference at line {}\n--- published\n+++ hookbox-sim\n",
            first + 1
        );
        for i in from..to {
            match (expected.get(i), actual.get(i)) {
                (Some(e), Some(a)) if e == a || masked.contains(&i) => diff += &format!("  {e}\n"),
                (e, a) => {
                    if let Some(e) = e {
                        diff += &format!("- {e}\n");
                    }
                    if let Some(a) = a {
                        diff += &format!("+ {a}\n");
                    }
                }
            }
        }
        panic!("{diff}");
    }
}
