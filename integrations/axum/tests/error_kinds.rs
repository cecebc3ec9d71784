//! The error kinds the docs name are the ones the code answers with: every kind in
//! `VerifyError::kind` and `EdgeError::kind` is a row of docs/design.md's table, and
//! every kind-shaped name anywhere in docs/ or README.md is a real kind (an alert on
//! a kind that does not exist never fires).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository root, two levels above this crate.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The string literals a `kind(&self) -> &'static str` function in `file` returns:
/// read from the source, so a kind added to the code is found without a list here.
fn kinds_in_source(file: &str) -> BTreeSet<String> {
    let text = read(&root().join(file));
    let start = text
        .find("pub fn kind(&self) -> &'static str {")
        .unwrap_or_else(|| panic!("{file} has no `kind` function"));
    let body = &text[start..];
    // the function ends at the first line that closes it at its own indentation
    let end = body.find("\n    }\n").expect("the end of `kind`");
    body[..end]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Every kind the code can answer with.
fn code_kinds() -> BTreeSet<String> {
    let mut kinds = kinds_in_source("core/src/error.rs");
    kinds.extend(kinds_in_source("integrations/axum/src/error.rs"));
    kinds
}

/// The markdown files users read: README.md and everything in docs/.
fn docs() -> Vec<(PathBuf, String)> {
    let mut files = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let path = entry.expect("a docs/ entry").path();
        if path.extension().is_some_and(|ext| ext == "md") {
            files.push(path);
        }
    }
    files
        .into_iter()
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect()
}

/// The `snake_case` names in backticks in `text`.
fn backticked_names(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2).filter(|name| {
        name.contains('_')
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// Names in the docs that start like a kind but are settings or fields, not kinds.
const NOT_KINDS: &[&str] = &["body_read_timeout", "body_keys", "body_encoding"];

#[test]
fn the_sample_kinds_are_read_from_the_source() {
    let kinds = code_kinds();
    for kind in [
        "signature_mismatch",
        "timestamp_too_old",
        "timestamp_in_future",
        "overloaded",
        "store_unavailable",
    ] {
        assert!(kinds.contains(kind), "{kind} not found in {kinds:?}");
    }
    assert_eq!(
        hookbox_axum::EdgeError::Overloaded { limit: 1 }.kind(),
        "overloaded"
    );
}

#[test]
fn every_kind_in_the_code_is_in_the_design_table() {
    let design = read(&root().join("docs/design.md"));
    // the first column of the table under "whose `error` field is the kind"
    let table: BTreeSet<String> = design
        .lines()
        .skip_while(|line| !line.starts_with("| kind |"))
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| line.split('|').nth(1))
        // every name in backticks, one-word kinds (`overloaded`) included
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_owned))
        .collect();
    let missing: Vec<_> = code_kinds().difference(&table).cloned().collect();
    assert!(
        missing.is_empty(),
        "kinds the code answers with but docs/design.md's table lacks: {missing:?}"
    );
    let stale: Vec<_> = table.difference(&code_kinds()).cloned().collect();
    assert!(
        stale.is_empty(),
        "docs/design.md's table lists kinds the code never answers with: {stale:?}"
    );
}

#[test]
fn every_kind_named_in_the_docs_exists() {
    let kinds = code_kinds();
    // a name is kind-shaped when it starts with the first word of a real kind
    // (`timestamp_…`, `store_…`, `missing_…`)
    let first_words: BTreeSet<&str> = kinds
        .iter()
        .filter_map(|kind| kind.split('_').next())
        .collect();
    let mut unknown = Vec::new();
    for (path, text) in docs() {
        for name in backticked_names(&text) {
            let first = name.split('_').next().unwrap_or_default();
            if first_words.contains(first) && !kinds.contains(name) && !NOT_KINDS.contains(&name) {
                unknown.push(format!("{}: `{name}`", path.display()));
            }
        }
        // `kind="…"` in alert rules and PromQL
        for quoted in text.split("kind=\"").skip(1) {
            let name = quoted.split('"').next().unwrap_or_default();
            if !kinds.contains(name) {
                unknown.push(format!("{}: kind=\"{name}\"", path.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "the docs name error kinds the code does not have (the kinds are {kinds:?}): {unknown:#?}"
    );
}
