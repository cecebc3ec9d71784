//! What a `hookbox new` project builds with by default (its store, its cache and its
//! relay's sinks) and where its hookbox crates come from: the choices the command
//! line makes, which the manifest and the README are written from.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::ValueEnum;

/// The store a new project builds with by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum StoreKind {
    /// An embedded SQLite file (`HOOKBOX_STORE` is its path).
    Sqlite,
    /// PostgreSQL (`HOOKBOX_STORE` is a `postgres://` URL).
    Postgres,
    /// MySQL or MariaDB (`HOOKBOX_STORE` is a `mysql://` URL).
    Mysql,
}

impl StoreKind {
    pub(super) fn feature(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
        }
    }
}

/// A front cache a new project builds in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum CacheKind {
    /// The Redis front cache (`hookbox-redis-cache`): duplicates answered from Redis,
    /// every decision still the database's.
    Redis,
}

impl CacheKind {
    pub(super) fn feature(self) -> &'static str {
        match self {
            Self::Redis => "redis",
        }
    }
}

/// A sink an outbox relay can be built with: each is a feature of the examples
/// whose handlers stage messages, and of `hookbox-outbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum SinkKind {
    /// HTTP endpoints (`http(s)://`).
    Http,
    /// NATS JetStream subjects (`nats://`).
    Nats,
    /// RabbitMQ queues and exchanges (`amqp(s)://`).
    Amqp,
}

impl SinkKind {
    pub(super) const ALL: [Self; 3] = [Self::Http, Self::Nats, Self::Amqp];

    pub(super) fn feature(self) -> &'static str {
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
pub(super) struct Build {
    pub(super) store: StoreKind,
    pub(super) cache: Option<CacheKind>,
    pub(super) outbox: Vec<SinkKind>,
}

impl Build {
    /// The `default` features of the project's Cargo.toml, given the example's own
    /// `default` list.
    pub(super) fn default_features(&self, example_default: &[String]) -> Vec<String> {
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
    pub(super) fn flags(&self) -> String {
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

/// Where the project's hookbox dependencies come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Source {
    /// crates.io, by version.
    Registry,
    /// A local checkout of the hookbox repository.
    Path(PathBuf),
    /// A git repository, optionally at a revision.
    Git { url: String, rev: Option<String> },
}
