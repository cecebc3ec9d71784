//! The unit tests of `hookbox new`: the embedded examples, the manifest and README
//! a project gets, the `--outbox` checks and the package name.

use std::collections::BTreeSet;

use clap::ValueEnum as _;
use toml::Value;

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
                if name.ends_with(".json") || name.starts_with("sample.") {
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
fn a_mysql_project_builds_with_mysql_by_default_in_every_example() {
    assert_eq!(StoreKind::from_str("mysql", false), Ok(StoreKind::Mysql));
    let mysql = Build {
        store: StoreKind::Mysql,
        cache: Some(CacheKind::Redis),
        outbox: Vec::new(),
    };
    let checkout = Source::Path(PathBuf::from("/src/hookbox"));
    for example in EXAMPLES {
        let (_, text) = example.files.iter().find(|(p, _)| *p == MANIFEST).unwrap();
        let written = manifest(text, "my-hooks", &mysql, &checkout).unwrap();
        let parsed: Table = written.parse().unwrap();
        let features = &parsed["features"];
        let default = features["default"].as_array().unwrap();
        assert_eq!(
            default[..2],
            [Value::from("mysql"), Value::from("redis")],
            "{written}"
        );
        // the other stores stay features of their own
        assert_eq!(
            features["mysql"],
            Value::from(vec!["dep:hookbox-diesel-mysql"]),
            "{written}"
        );
        for other in ["sqlite", "postgres"] {
            assert!(features.get(other).is_some(), "{other}: {written}");
        }
        let dependency = &parsed["dependencies"]["hookbox-diesel-mysql"];
        assert_eq!(dependency["optional"], Value::from(true), "{written}");
        assert_eq!(
            dependency["path"],
            Value::from("/src/hookbox/stores/diesel-mysql"),
            "{written}"
        );
    }
    let files = project(&EXAMPLES[2], "my-hooks", &mysql, &Source::Registry).unwrap();
    let (_, readme) = files.iter().find(|(p, _)| p == "README.md").unwrap();
    assert!(
        readme.contains("--store mysql --cache redis` from hookbox's"),
        "{readme}"
    );
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
