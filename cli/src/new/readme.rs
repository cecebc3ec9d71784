//! The new project's README.md: the example's, rewritten to run in the project's
//! directory.

use std::fmt::Write as _;

use super::build::Build;

/// The example's README for the new project: the commands run in this directory
/// (`cargo run`, `hookbox send … --body-file sample.json`), not in hookbox's checkout,
/// and the section on copying the example out is dropped. Without the cache built
/// in, a command that sets `HOOKBOX_REDIS_URL` also turns on the `redis` feature.
pub(super) fn readme(text: &str, provider: &str, name: &str, build: &Build) -> String {
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
