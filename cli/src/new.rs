//! `hookbox new`: writes a standalone receiver project from the example for one
//! provider.
//!
//! The example's files are embedded in this binary when it is compiled
//! (`include_str!` through the symlinks in `cli/scaffold/`, which `cargo package`
//! resolves to the files themselves), so a project always starts from the examples
//! this version of hookbox was tested with: its `src/`, `tests/` (on
//! `hookbox-testkit`), sample events and README. The Cargo.toml is the example's own,
//! with every `workspace = true` resolved from the workspace's Cargo.toml into an
//! explicit version, and hookbox's crates taken from crates.io, a checkout
//! (`--hookbox-path`) or a git repository (`--hookbox-git`).

#![allow(clippy::print_stdout)] // the list of written files and the next steps

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use toml::{Table, Value};

use crate::UsageError;
use crate::providers::ProviderName;

/// Printed after `hookbox new --help`.
pub(crate) const AFTER_HELP: &str = "Examples:
  hookbox new my-hooks --provider github --hookbox-path ~/src/hookbox
  hookbox new billing --provider stripe --store postgres --hookbox-git https://github.com/hookbox/hookbox
  hookbox new billing --provider stripe --cache redis --outbox nats --hookbox-path ~/src/hookbox
  cd my-hooks && cargo build && cargo test

The project is the example for the provider as this version of hookbox was tested
with it; its README.md says how to run it and send it a signed sample event.";

/// Arguments of `hookbox new`.
#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// The directory to create; its name is the package's and the binary's name.
    dir: PathBuf,
    /// The provider whose example the project starts from.
    #[arg(long, value_enum)]
    provider: ProviderName,
    /// The store the project builds with by default (its `default` feature); the
    /// other stays available as a feature.
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// Build the Redis front cache in by default (its `redis` feature, which
    /// `HOOKBOX_REDIS_URL` turns on at run time). Without it the project does not
    /// compile the Redis client, and `HOOKBOX_REDIS_URL` stops it at start.
    #[arg(long, value_enum, value_name = "CACHE")]
    cache: Option<CacheKind>,
    /// The sinks the project's outbox relay is built with (`http`, `nats`, `amqp`;
    /// several with commas): its relay then speaks only those, and compiles only
    /// their clients. For the examples that stage outbox messages (stripe: http, nats,
    /// amqp; shopify: nats, amqp); default: the example's own.
    #[arg(long, value_enum, value_name = "SINK", value_delimiter = ',')]
    outbox: Vec<SinkKind>,
    /// Take hookbox's crates from this checkout (`path` dependencies), until they are
    /// on crates.io.
    #[arg(long, value_name = "CHECKOUT", conflicts_with = "hookbox_git")]
    hookbox_path: Option<PathBuf>,
    /// Take hookbox's crates from this git repository (`git` dependencies).
    #[arg(long, value_name = "URL")]
    hookbox_git: Option<String>,
    /// With `--hookbox-git`: the commit, tag or branch to build (`rev`).
    #[arg(long, value_name = "REV", requires = "hookbox_git")]
    hookbox_rev: Option<String>,
}

/// The store a new project builds with by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// An embedded SQLite file (`HOOKBOX_STORE` is its path).
    Sqlite,
    /// PostgreSQL (`HOOKBOX_STORE` is a `postgres://` URL).
    Postgres,
}

impl StoreKind {
    fn feature(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// A front cache a new project builds in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CacheKind {
    /// The Redis front cache (`hookbox-redis-cache`): duplicates answered from Redis,
    /// every decision still the database's.
    Redis,
}

impl CacheKind {
    fn feature(self) -> &'static str {
        match self {
            Self::Redis => "redis",
        }
    }
}

/// A sink an outbox relay can be built with: each is a feature of the examples
/// whose handlers stage messages, and of `hookbox-outbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SinkKind {
    /// HTTP endpoints (`http(s)://`).
    Http,
    /// NATS JetStream subjects (`nats://`).
    Nats,
    /// RabbitMQ queues and exchanges (`amqp(s)://`).
    Amqp,
}

impl SinkKind {
    const ALL: [Self; 3] = [Self::Http, Self::Nats, Self::Amqp];

    fn feature(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Nats => "nats",
            Self::Amqp => "amqp",
        }
    }
}

/// What a new project builds by default: the store, the cache if any, and the
/// relay's sinks (empty: the example's own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Build {
    store: StoreKind,
    cache: Option<CacheKind>,
    outbox: Vec<SinkKind>,
}

impl Build {
    /// The `default` features of the project's Cargo.toml, given the example's own
    /// `default` list.
    fn default_features(&self, example_default: &[String]) -> Vec<String> {
        let mut features = vec![self.store.feature().to_owned()];
        features.extend(self.cache.map(|cache| cache.feature().to_owned()));
        if self.outbox.is_empty() {
            let sinks = SinkKind::ALL.map(SinkKind::feature);
            features.extend(
                example_default
                    .iter()
                    .filter(|feature| sinks.contains(&feature.as_str()))
                    .cloned(),
            );
        } else {
            features.extend(self.outbox.iter().map(|sink| sink.feature().to_owned()));
        }
        features
    }

    /// The `hookbox new` flags that made it, after `--provider`.
    fn flags(&self) -> String {
        let mut flags = format!("--store {}", self.store.feature());
        if let Some(cache) = self.cache {
            let _ = write!(flags, " --cache {}", cache.feature());
        }
        if !self.outbox.is_empty() {
            let sinks: Vec<&str> = self.outbox.iter().map(|sink| sink.feature()).collect();
            let _ = write!(flags, " --outbox {}", sinks.join(","));
        }
        flags
    }
}

/// The sink features an example's relay can be built with, from its manifest.
fn sink_features(example: &Example) -> Vec<&'static str> {
    let features: Option<Table> = example
        .files
        .iter()
        .find(|(path, _)| *path == MANIFEST)
        .and_then(|(_, text)| text.parse::<Table>().ok())
        .and_then(|manifest| manifest.get("features")?.as_table().cloned());
    SinkKind::ALL
        .map(SinkKind::feature)
        .into_iter()
        .filter(|sink| features.as_ref().is_some_and(|f| f.contains_key(*sink)))
        .collect()
}

/// Refuses `--outbox` sinks the example's relay cannot be built with.
fn check_outbox(example: &Example, outbox: &[SinkKind]) -> Result<(), UsageError> {
    let offered = sink_features(example);
    let Some(missing) = outbox
        .iter()
        .find(|sink| !offered.contains(&sink.feature()))
    else {
        return Ok(());
    };
    if offered.is_empty() {
        let relaying: Vec<String> = EXAMPLES
            .iter()
            .filter_map(|other| {
                let sinks = sink_features(other);
                (!sinks.is_empty()).then(|| format!("{} ({})", other.provider, sinks.join(", ")))
            })
            .collect();
        Err(UsageError(format!(
            "--outbox: the {} example stages no outbox messages, so it has no relay to \
             build; the examples that do: {} (docs/outbox.md shows how to stage your own)",
            example.provider,
            relaying.join(", ")
        )))
    } else {
        Err(UsageError(format!(
            "--outbox {}: the {} example's relay can be built with {}",
            missing.feature(),
            example.provider,
            offered.join(", ")
        )))
    }
}

/// Where the project's hookbox dependencies come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// crates.io, by version.
    Registry,
    /// A local checkout of the hookbox repository.
    Path(PathBuf),
    /// A git repository, optionally at a revision.
    Git { url: String, rev: Option<String> },
}

/// One example, as embedded: its name and its files by path in the new project.
struct Example {
    provider: &'static str,
    files: &'static [(&'static str, &'static str)],
}

/// Embeds `cli/scaffold/<provider>/<file>` (a symlink into `examples/<provider>/`).
macro_rules! embed {
    ($provider:literal: $($file:literal),+ $(,)?) => {
        Example {
            provider: $provider,
            files: &[$(($file, include_str!(concat!("../scaffold/", $provider, "/", $file)))),+],
        }
    };
}

/// The workspace's Cargo.toml: the versions behind every `workspace = true`.
const WORKSPACE: &str = include_str!("../scaffold/workspace.toml");

/// The example's Cargo.toml, embedded as `manifest.toml` (a directory with a file
/// named Cargo.toml would be a package of its own to `cargo package`).
const MANIFEST: &str = "manifest.toml";

/// Every example `hookbox new` can start from. `scaffold_embeds_every_file_of_the_examples`
/// fails when an example gains a file that is not listed here.
const EXAMPLES: &[Example] = &[
    embed!("stripe": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs", "tests/services.rs"),
    embed!("shopify": "manifest.toml", "README.md", "sample.json", "sample-updated.json",
        "sample-updated-older.json", "src/main.rs", "tests/receive.rs", "tests/brokers.rs"),
    embed!("github": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs"),
    embed!("svix": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs"),
    embed!("standard": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs", "tests/crash.rs"),
    embed!("slack": "manifest.toml", "README.md", "sample.json", "handshake.json",
        "src/main.rs", "tests/receive.rs"),
    embed!("twitch": "manifest.toml", "README.md", "sample.json", "handshake.json",
        "src/main.rs", "tests/receive.rs"),
    embed!("zoom": "manifest.toml", "README.md", "sample.json", "handshake.json",
        "src/main.rs", "tests/receive.rs"),
    embed!("discord": "manifest.toml", "README.md", "sample.json", "handshake.json",
        "src/main.rs", "tests/receive.rs"),
    embed!("paddle": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs"),
];

/// Runs `hookbox new`: 0 when the project was written, 1 when it could not be
/// written, 2 for usage errors.
pub(crate) fn run(args: &NewArgs) -> Result<ExitCode, UsageError> {
    let example = EXAMPLES
        .iter()
        .find(|example| example.provider == args.provider.as_str())
        .ok_or_else(|| {
            UsageError(format!(
                "there is no example for {} to start from yet",
                args.provider.as_str()
            ))
        })?;
    let name = package_name(&args.dir)?;
    let source = match (&args.hookbox_path, &args.hookbox_git) {
        (Some(path), _) => {
            let checkout = std::path::absolute(path)
                .map_err(|err| UsageError(format!("--hookbox-path {}: {err}", path.display())))?;
            if !checkout.join("core").join("Cargo.toml").is_file() {
                return Err(UsageError(format!(
                    "--hookbox-path {}: not a hookbox checkout (no core/Cargo.toml)",
                    checkout.display()
                )));
            }
            Source::Path(checkout)
        }
        (None, Some(url)) => Source::Git {
            url: url.clone(),
            rev: args.hookbox_rev.clone(),
        },
        (None, None) => Source::Registry,
    };
    check_outbox(example, &args.outbox)?;
    let build = Build {
        store: args.store,
        cache: args.cache,
        outbox: args.outbox.clone(),
    };
    let files = project(example, &name, &build, &source).map_err(UsageError)?;

    if args.dir.exists()
        && std::fs::read_dir(&args.dir).map_or(true, |mut entries| entries.next().is_some())
    {
        return Err(UsageError(format!(
            "{} already exists and is not empty; give a new directory",
            args.dir.display()
        )));
    }
    for (path, text) in &files {
        let target = args.dir.join(path);
        let written = target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&target, text));
        if let Err(err) = written {
            eprintln!("error: cannot write {}: {err}", target.display());
            return Ok(ExitCode::FAILURE);
        }
    }
    println!(
        "created {} from the {} example ({}):",
        args.dir.display(),
        example.provider,
        build.flags()
    );
    for (path, _) in &files {
        println!("  {path}");
    }
    println!(
        "next: cd {} && cargo test && cargo run   (README.md has the rest)",
        args.dir.display()
    );
    if source == Source::Registry {
        println!(
            "note: the Cargo.toml takes hookbox's crates from crates.io; until they are published, use --hookbox-path <checkout> or --hookbox-git <url>"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The package name for `dir`: its last component, which must be a valid crate name.
fn package_name(dir: &Path) -> Result<String, UsageError> {
    let name = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(name.to_owned())
    } else {
        Err(UsageError(format!(
            "{}: the directory's name becomes the package's, so it must start with a letter and hold only letters, digits, `-` and `_`",
            dir.display()
        )))
    }
}

/// Every file of the new project, by path, with its text.
fn project(
    example: &Example,
    name: &str,
    build: &Build,
    source: &Source,
) -> Result<Vec<(String, String)>, String> {
    let original = format!("example-{}", example.provider);
    let rename = |text: &str| {
        text.replace(&original, name)
            .replace(&original.replace('-', "_"), &name.replace('-', "_"))
    };
    let mut files = Vec::new();
    for (path, text) in example.files {
        match *path {
            MANIFEST => files.push((
                "Cargo.toml".to_owned(),
                manifest(text, name, build, source)?,
            )),
            "README.md" => files.push((
                (*path).to_owned(),
                readme(&rename(text), example.provider, name, build),
            )),
            _ => files.push(((*path).to_owned(), rename(text))),
        }
    }
    // the SQLite file and its WAL beside it are the project's data, not its source
    files.push((
        ".gitignore".to_owned(),
        "/target\n*.db\n*.db-shm\n*.db-wal\n".to_owned(),
    ));
    Ok(files)
}

/// The example's README for the new project: the commands run in this directory
/// (`cargo run`, `hookbox send … --body-file sample.json`), not in hookbox's checkout,
/// and the section on copying the example out is dropped. Without the cache built
/// in, a command that sets `HOOKBOX_REDIS_URL` also turns on the `redis` feature.
fn readme(text: &str, provider: &str, name: &str, build: &Build) -> String {
    let package = format!("-p {name}");
    let mut out = String::new();
    let mut skipping = false;
    let mut sets_redis = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            // this project is the copy
            skipping = line.starts_with("## Copying it into your project");
        }
        if skipping {
            continue;
        }
        let line = line
            .replace("cargo run -q -p hookbox-cli --", "hookbox")
            .replace(&format!("{package} "), "")
            .replace(&package, "")
            .replace(&format!("examples/{provider}/"), "")
            .replace("at the root of this repository", "in this directory");
        // the command a `HOOKBOX_REDIS_URL=…` line continues into
        let line = if sets_redis && build.cache.is_none() {
            line.replace("--features postgres", "--features postgres,redis")
        } else {
            line
        };
        sets_redis = line.contains("HOOKBOX_REDIS_URL=redis") && line.ends_with('\\');
        out.push_str(line.trim_end());
        out.push('\n');
        if out.lines().count() == 1 {
            let _ = write!(
                out,
                "\nCreated by `hookbox new {name} --provider {provider} {}` from hookbox's \
                 `examples/{provider}`. `hookbox` is the command line that created it \
                 (`cargo install hookbox-cli`).\n",
                build.flags()
            );
        }
    }
    out
}

/// The example's Cargo.toml as a package of its own: `workspace = true` resolved from
/// the workspace's tables, hookbox's crates from `source`, `build`'s features the
/// default ones.
fn manifest(text: &str, name: &str, build: &Build, source: &Source) -> Result<String, String> {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The files of `dir` and below, by path relative to `dir`, following symlinks.
    fn files_under(dir: &Path, prefix: &str, into: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("a readable directory") {
            let path = entry.expect("an entry").path();
            let name = format!(
                "{prefix}{}",
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
            );
            if path.is_dir() {
                files_under(&path, &format!("{name}/"), into);
            } else {
                into.insert(name);
            }
        }
    }

    #[test]
    fn scaffold_embeds_every_file_of_the_examples() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        for example in EXAMPLES {
            let embedded: BTreeSet<String> =
                example.files.iter().map(|(p, _)| (*p).to_owned()).collect();
            // what cli/scaffold/<provider> holds (the symlinks, followed) …
            let mut scaffold = BTreeSet::new();
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("scaffold")
                .join(example.provider);
            files_under(&dir, "", &mut scaffold);
            assert_eq!(embedded, scaffold, "cli/scaffold/{}", example.provider);
            // … and, in the workspace, what the example itself holds
            let dir = examples.join(example.provider);
            if dir.is_dir() {
                let mut wanted = BTreeSet::from([MANIFEST.to_owned(), "README.md".to_owned()]);
                for sub in ["src", "tests"] {
                    files_under(&dir.join(sub), &format!("{sub}/"), &mut wanted);
                }
                for entry in std::fs::read_dir(&dir).expect("the example") {
                    let name = entry.expect("an entry").file_name();
                    let name = name.to_string_lossy();
                    if name.ends_with(".json") {
                        wanted.insert(name.into_owned());
                    }
                }
                assert_eq!(
                    embedded, wanted,
                    "examples/{}: add a symlink in cli/scaffold/{0}/ and a line in EXAMPLES",
                    example.provider
                );
            }
        }
        // every provider `hookbox new --provider` accepts has an example
        for provider in ProviderName::value_variants() {
            assert!(
                EXAMPLES.iter().any(|e| e.provider == provider.as_str()),
                "{}",
                provider.as_str()
            );
        }
    }

    #[test]
    fn the_manifest_has_explicit_versions_and_the_chosen_source() {
        let github = &EXAMPLES[2];
        let (_, text) = github.files.iter().find(|(p, _)| *p == MANIFEST).unwrap();
        let sqlite = Build {
            store: StoreKind::Sqlite,
            cache: None,
            outbox: Vec::new(),
        };
        let registry = manifest(text, "my-hooks", &sqlite, &Source::Registry).unwrap();
        assert!(!registry.contains("workspace = true"), "{registry}");
        assert!(registry.contains("name = \"my-hooks\""), "{registry}");
        assert!(
            registry.contains("hookbox-github = \"0.1.0\""),
            "{registry}"
        );
        assert!(registry.contains("default = [\"sqlite\"]"), "{registry}");
        assert!(
            registry.contains("[dev-dependencies]\nhookbox-testkit = \"0.1.0\""),
            "{registry}"
        );

        let checkout = Source::Path(PathBuf::from("/src/hookbox"));
        let postgres_and_redis = Build {
            store: StoreKind::Postgres,
            cache: Some(CacheKind::Redis),
            outbox: Vec::new(),
        };
        let path = manifest(text, "my-hooks", &postgres_and_redis, &checkout).unwrap();
        assert!(
            path.contains(
                r#"hookbox-github = { version = "0.1.0", path = "/src/hookbox/providers/github" }"#
            ),
            "{path}"
        );
        assert!(
            path.contains("default = [\"postgres\", \"redis\"]"),
            "{path}"
        );
        assert!(
            path.contains("redis = [\"dep:hookbox-redis-cache\"]"),
            "{path}"
        );
        let git = Source::Git {
            url: "https://github.com/hookbox/hookbox".into(),
            rev: Some("v0.1.0".into()),
        };
        let git = manifest(text, "my-hooks", &sqlite, &git).unwrap();
        assert!(
            git.contains(r#"hookbox-github = { version = "0.1.0", git = "https://github.com/hookbox/hookbox", rev = "v0.1.0" }"#),
            "{git}"
        );
        // it parses back as TOML, with the workspace's lints written out
        let parsed: Table = git.parse().unwrap();
        assert!(parsed["lints"]["rust"].get("unsafe_code").is_some());
    }

    #[test]
    fn the_readme_runs_in_the_new_directory() {
        let github = &EXAMPLES[2];
        let sqlite = Build {
            store: StoreKind::Sqlite,
            cache: None,
            outbox: Vec::new(),
        };
        let files = project(github, "my-hooks", &sqlite, &Source::Registry).unwrap();
        let (_, readme) = files.iter().find(|(p, _)| p == "README.md").unwrap();
        assert!(readme.contains("--body-file sample.json"), "{readme}");
        assert!(
            readme.contains("hookbox send --provider github"),
            "{readme}"
        );
        assert!(!readme.contains("-p example-github"), "{readme}");
        assert!(!readme.contains("cargo run -q -p hookbox-cli"), "{readme}");
        assert!(
            !readme.contains("## Copying it into your project"),
            "{readme}"
        );
        // built without the cache: the command that sets a Redis URL turns it on
        assert!(
            readme.contains(
                "HOOKBOX_REDIS_URL=redis://127.0.0.1:6379 \\\n  cargo run --features postgres,redis"
            ),
            "{readme}"
        );
        assert!(
            readme.contains("--store sqlite` from hookbox's"),
            "{readme}"
        );
        let (_, test) = files.iter().find(|(p, _)| p == "tests/receive.rs").unwrap();
        assert!(test.contains("CARGO_BIN_EXE_my-hooks"), "{test}");
        assert!(
            !test.contains("hookbox_example_testkit"),
            "the tests use the published testkit"
        );
    }

    #[test]
    fn outbox_sinks_are_the_relays_default_features_where_the_example_has_a_relay() {
        let example = |provider: &str| {
            EXAMPLES
                .iter()
                .find(|e| e.provider == provider)
                .expect("an example")
        };
        let manifest_of = |provider: &str, outbox: Vec<SinkKind>| {
            let (_, text) = example(provider)
                .files
                .iter()
                .find(|(p, _)| *p == MANIFEST)
                .unwrap();
            let build = Build {
                store: StoreKind::Sqlite,
                cache: None,
                outbox,
            };
            let written = manifest(text, "my-hooks", &build, &Source::Registry).unwrap();
            let parsed: Table = written.parse().unwrap();
            parsed["features"]["default"].clone()
        };
        // the example's own sinks by default, the chosen ones otherwise
        assert_eq!(
            manifest_of("stripe", Vec::new()),
            Value::from(vec!["sqlite", "http"])
        );
        assert_eq!(
            manifest_of("stripe", vec![SinkKind::Nats]),
            Value::from(vec!["sqlite", "nats"])
        );
        assert_eq!(
            manifest_of("shopify", vec![SinkKind::Amqp]),
            Value::from(vec!["sqlite", "amqp"])
        );
        assert!(check_outbox(example("stripe"), &SinkKind::ALL).is_ok());
        let refused = check_outbox(example("shopify"), &[SinkKind::Http]).unwrap_err();
        assert!(
            refused.0.contains("can be built with nats, amqp"),
            "{}",
            refused.0
        );
        let refused = check_outbox(example("github"), &[SinkKind::Http]).unwrap_err();
        assert!(
            refused
                .0
                .contains("stripe (http, nats, amqp), shopify (nats, amqp)"),
            "{}",
            refused.0
        );
    }

    #[test]
    fn a_directory_name_must_be_a_crate_name() {
        assert_eq!(package_name(Path::new("a/my-hooks")).unwrap(), "my-hooks");
        assert!(package_name(Path::new("9lives")).is_err());
        assert!(package_name(Path::new("my hooks")).is_err());
    }
}
