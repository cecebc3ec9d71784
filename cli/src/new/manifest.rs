//! The new project's Cargo.toml: the example's own, written out as a package of its
//! own (`workspace = true` resolved, hookbox's crates from the chosen source), and
//! the TOML keys and values it is written with.

use std::fmt::Write as _;

use toml::{Table, Value};

use super::build::{Build, Source};

/// The workspace's Cargo.toml: the versions behind every `workspace = true`.
const WORKSPACE: &str = include_str!("../../scaffold/workspace.toml");

/// The example's Cargo.toml as a package of its own: `workspace = true` resolved from
/// the workspace's tables, hookbox's crates from `source`, `build`'s features the
/// default ones.
pub(super) fn manifest(
    text: &str,
    name: &str,
    build: &Build,
    source: &Source,
) -> Result<String, String> {
    let example: Table = text
        .parse()
        .map_err(|err| format!("the embedded example manifest: {err}"))?;
    let workspace: Table = WORKSPACE
        .parse()
        .map_err(|err| format!("the embedded workspace manifest: {err}"))?;
    let workspace = workspace
        .get("workspace")
        .and_then(Value::as_table)
        .ok_or("the embedded workspace manifest has no [workspace]")?;
    let package = workspace.get("package").and_then(Value::as_table);
    let field = |key: &str| {
        package
            .and_then(|package| package.get(key))
            .map(inline)
            .unwrap_or_default()
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        "# written by `hookbox new`: hookbox's example as a package of your own\n[package]"
    );
    let _ = writeln!(out, "name = {}", inline(&Value::from(name)));
    let _ = writeln!(out, "version = \"0.1.0\"");
    let _ = writeln!(out, "edition = {}", field("edition"));
    let _ = writeln!(out, "rust-version = {}", field("rust-version"));
    let _ = writeln!(out, "publish = false");

    if let Some(features) = example.get("features").and_then(Value::as_table) {
        let _ = writeln!(out, "\n[features]");
        for (feature, enables) in features {
            let enables = if feature == "default" {
                let own: Vec<String> = enables
                    .as_array()
                    .map(|list| {
                        list.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                Value::from(build.default_features(&own))
            } else {
                enables.clone()
            };
            let _ = writeln!(out, "{} = {}", key(feature), inline(&enables));
        }
    }
    let empty = Table::new();
    let workspace_deps = workspace
        .get("dependencies")
        .and_then(Value::as_table)
        .unwrap_or(&empty);
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = example.get(section).and_then(Value::as_table) else {
            continue;
        };
        let _ = writeln!(out, "\n[{section}]");
        for (dep, spec) in deps {
            let spec = dependency(dep, spec, workspace_deps, source)?;
            let _ = writeln!(out, "{} = {}", key(dep), inline(&spec));
        }
    }
    // the lints the example is written against
    if let Some(lints) = workspace.get("lints").and_then(Value::as_table) {
        for (tool, table) in lints {
            let Some(table) = table.as_table() else {
                continue;
            };
            let _ = writeln!(out, "\n[lints.{}]", key(tool));
            for (lint, level) in table {
                let _ = writeln!(out, "{} = {}", key(lint), inline(level));
            }
        }
    }
    let _ = writeln!(
        out,
        "\n# a root of its own, even inside another workspace's directory\n[workspace]"
    );
    Ok(out)
}

/// One dependency as the new project writes it.
fn dependency(
    dep: &str,
    spec: &Value,
    workspace_deps: &Table,
    source: &Source,
) -> Result<Value, String> {
    let mut spec = match spec {
        Value::String(version) => {
            Table::from_iter([("version".to_owned(), version.clone().into())])
        }
        Value::Table(table) => table.clone(),
        other => return Err(format!("dependency {dep}: unexpected {other}")),
    };
    if spec.remove("workspace").and_then(|v| v.as_bool()) == Some(true) {
        let base = workspace_deps
            .get(dep)
            .ok_or_else(|| format!("dependency {dep}: not in the workspace's dependencies"))?;
        let mut resolved = match base {
            Value::String(version) => {
                Table::from_iter([("version".to_owned(), version.clone().into())])
            }
            Value::Table(table) => table.clone(),
            other => return Err(format!("workspace dependency {dep}: unexpected {other}")),
        };
        // features add to the workspace's; `optional` and the like are the member's
        let mut features: Vec<Value> = resolved
            .get("features")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(more) = spec.remove("features").as_ref().and_then(Value::as_array) {
            for feature in more {
                if !features.contains(feature) {
                    features.push(feature.clone());
                }
            }
        }
        resolved.extend(spec);
        if !features.is_empty() {
            resolved.insert("features".to_owned(), Value::Array(features));
        }
        spec = resolved;
    }
    // one of ours: where it comes from
    if let Some(path) = spec.remove("path") {
        let path = path.as_str().unwrap_or_default().to_owned();
        let mut ordered = Table::new();
        if let Some(version) = spec.remove("version") {
            ordered.insert("version".to_owned(), version);
        }
        match source {
            Source::Registry => {}
            Source::Path(checkout) => {
                let path = checkout.join(path);
                ordered.insert(
                    "path".to_owned(),
                    path.to_string_lossy().into_owned().into(),
                );
            }
            Source::Git { url, rev } => {
                ordered.insert("git".to_owned(), url.clone().into());
                if let Some(rev) = rev {
                    ordered.insert("rev".to_owned(), rev.clone().into());
                }
            }
        }
        ordered.extend(spec);
        spec = ordered;
    }
    if spec.len() == 1
        && let Some(Value::String(version)) = spec.get("version")
    {
        return Ok(Value::String(version.clone()));
    }
    Ok(Value::Table(spec))
}

/// A TOML key: bare when it can be, quoted otherwise.
fn key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        key.to_owned()
    } else {
        inline(&Value::from(key))
    }
}

/// A TOML value on one line: strings, booleans, integers, arrays and inline tables.
fn inline(value: &Value) -> String {
    match value {
        // a JSON string is a TOML basic string
        Value::String(text) => serde_json::Value::from(text.as_str()).to_string(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Table(table) => {
            let entries: Vec<String> = table
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
        other => other.to_string(),
    }
}
