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
//!
//! The parts: [`build`](mod@build) (what the project builds with by default and where its
//! hookbox crates come from), [`manifest`](mod@manifest) (its Cargo.toml), [`readme`](mod@readme) (its
//! README.md); the unit tests are in `tests.rs`.

#![allow(clippy::print_stdout)] // the list of written files and the next steps

mod build;
mod manifest;
mod readme;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use toml::Table;

use crate::UsageError;
use crate::providers::ProviderName;
use build::{Build, CacheKind, SinkKind, Source, StoreKind};
use manifest::manifest;
use readme::readme;

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
    /// others stay available as features.
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
            files: &[$(($file, include_str!(concat!("../../scaffold/", $provider, "/", $file)))),+],
        }
    };
}

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
        "tests/receive.rs", "tests/crash.rs", "tests/outage.rs"),
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
    embed!("twilio": "manifest.toml", "README.md", "sample.form", "src/main.rs",
        "tests/receive.rs"),
    embed!("square": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs"),
    embed!("gitlab": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs"),
    embed!("linear": "manifest.toml", "README.md", "sample.json", "src/main.rs",
        "tests/receive.rs"),
    embed!("custom": "manifest.toml", "README.md", "sample.json", "src/main.rs",
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
