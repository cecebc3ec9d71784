#!/usr/bin/env bash
# Builds every example the way a user who copies it out of this repository would:
# each in a temporary directory of its own with its src/, tests/, README.md and
# sample files, and a Cargo.toml that stands alone (every `workspace = true` resolved
# from the root Cargo.toml, our crates as `path = "/abs/path"` dependencies, the
# dev-dependencies kept, no workspace lints, a `[workspace]` table of its own). Each
# copy is built, its tests included, with its default features, with
# `--features postgres` and with `--features mysql`.
#
# It fails when a copy or its tests do not build, depends (directly, through a
# dev-dependency, or through our other crates) on a crate of ours that says
# `publish = false` (a user could not get it from crates.io), or its source still
# mentions the old plumbing (`Box::pin`, `scope_boxed`, `BoxFuture`,
# `hookbox-example-kit`, the unpublished `hookbox-example-testkit`).
#
# All copies share one target directory (CHECK_EXAMPLES_TARGET_DIR, by default
# target/examples-copy) and the workspace's Cargo.lock, so dependencies compile once
# and at the versions the workspace tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CHECK_EXAMPLES_TARGET_DIR:-$ROOT/target/examples-copy}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# as check-new.sh, which shares the target: no incremental caches for code built once
export CARGO_INCREMENTAL=0
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hookbox-examples.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# writes $2/Cargo.toml from example $1's manifest; prints problems on stderr and exits
# 1 when there are any (after writing, so every problem is reported at once)
standalone_manifest() {
  python3 - "$ROOT" "$1" "$2" <<'PY'
import json, os, sys, tomllib

root, example, out = sys.argv[1:4]
problems = []

def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)

workspace = load(os.path.join(root, "Cargo.toml"))["workspace"]
ws_package = workspace.get("package", {})
ws_deps = workspace.get("dependencies", {})
manifest = load(os.path.join(example, "Cargo.toml"))
name = manifest["package"]["name"]

def value(v):
    """A TOML value: strings, booleans, integers, arrays and inline tables."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }"
    raise SystemExit(f"{name}: cannot write {v!r}")

def key(k):
    """A TOML key: bare when it can be, quoted otherwise."""
    return k if k and all(c.isalnum() or c in "-_" for c in k) else json.dumps(k)

def inherits(v):
    return isinstance(v, dict) and v.get("workspace") is True

def resolve(dep_name, spec, base_dir):
    """A dependency as a copy outside the workspace must write it."""
    spec = {"version": spec} if isinstance(spec, str) else dict(spec)
    if spec.pop("workspace", False):
        if dep_name not in ws_deps:
            problems.append(f"{name}: {dep_name}.workspace = true, but the root has no {dep_name}")
            return spec
        base = ws_deps[dep_name]
        base = {"version": base} if isinstance(base, str) else dict(base)
        features = base.get("features", []) + [f for f in spec.pop("features", []) if f not in base.get("features", [])]
        base.update(spec)  # optional, package, …
        if features:
            base["features"] = features
        spec, base_dir = base, root
    if "path" in spec:
        spec["path"] = os.path.normpath(os.path.join(base_dir, spec["path"]))
        spec.pop("version", None)
    return spec

lines = ["# written by scripts/check-examples.sh: the example as a crate of its own", "[package]"]
for field, v in manifest["package"].items():
    if inherits(v):
        if field not in ws_package:
            problems.append(f"{name}: package.{field}.workspace = true, but the root has no {field}")
            continue
        v = ws_package[field]
    lines.append(f"{field} = {value(v)}")

for section, table in manifest.items():
    if section == "package":
        continue
    if section == "lints":
        if not inherits(table):
            lines += ["", "[lints]"] + [f"{key(k)} = {value(v)}" for k, v in table.items()]
        continue
    if section == "features":
        lines += ["", "[features]"] + [f"{key(k)} = {value(v)}" for k, v in table.items()]
        continue
    if section in ("dependencies", "dev-dependencies", "build-dependencies"):
        lines += ["", f"[{section}]"]
        for dep, spec in table.items():
            lines.append(f"{key(dep)} = {value(resolve(dep, spec, example))}")
        continue
    problems.append(f"{name}: check-examples.sh does not know how to copy [{section}]")
lines += ["", "# its own root: not a member of any workspace above it", "[workspace]", ""]
with open(os.path.join(out, "Cargo.toml"), "w") as f:
    f.write("\n".join(lines))

# every crate of ours the copy builds on, through its dependencies and its tests'
# dev-dependencies (and their normal dependencies), must be publishable: a user gets
# it from crates.io, not from this checkout
def our_deps(manifest_dir, m, sections=("dependencies", "build-dependencies")):
    for section in sections:
        for dep, spec in m.get(section, {}).items():
            spec = resolve(dep, spec, manifest_dir)
            if isinstance(spec, dict) and "path" in spec:
                yield dep, spec["path"]

everything = ("dependencies", "dev-dependencies", "build-dependencies")
seen, todo = set(), [(dep, path, name) for dep, path in our_deps(example, manifest, everything)]
while todo:
    dep, path, via = todo.pop()
    if path in seen:
        continue
    seen.add(path)
    m = load(os.path.join(path, "Cargo.toml"))
    publish = m["package"].get("publish", True)
    if inherits(publish):
        publish = ws_package.get("publish", True)
    if publish is False or publish == []:
        problems.append(f"{name} depends on {dep} (via {via}), whose Cargo.toml says publish = false")
    todo += [(d, p, dep) for d, p in our_deps(path, m)]

# the source must read as the new API: no boxed futures, no shared example crate
for dirpath, _, files in [w for d in ("src", "tests") for w in os.walk(os.path.join(example, d))]:
    for file in files:
        path = os.path.join(dirpath, file)
        text = open(path, encoding="utf-8").read()
        for word in ("Box::pin", "scope_boxed", "BoxFuture", "hookbox-example-kit", "hookbox_example_kit",
                     "hookbox-example-testkit", "hookbox_example_testkit"):
            if word in text:
                problems.append(f"{os.path.relpath(path, root)} mentions {word}")

for problem in problems:
    print(f"check-examples: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}

# checks that the copy's Cargo.lock (pruned by cargo to what the copy uses) pins
# every package at a version the workspace's Cargo.lock has
same_versions() {
  python3 - "$ROOT/Cargo.lock" "$1/Cargo.lock" <<'PY'
import sys, tomllib
def packages(path):
    with open(path, "rb") as f:
        return {(p["name"], p["version"]) for p in tomllib.load(f)["package"]}
workspace, copy = packages(sys.argv[1]), packages(sys.argv[2])
new = sorted(f"{n} {v}" for n, v in copy - workspace)
for package in new:
    print(f"check-examples: {sys.argv[2]} resolved {package}, which the workspace does not lock", file=sys.stderr)
sys.exit(1 if new else 0)
PY
}

# removes what cargo built for the copy $1 (its binary and test executables, a few
# hundred MB per build), from the JSON messages in $2: the next run's copy has another
# path, so another package id, and never reuses them; the dependencies stay
remove_artifacts() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys
copy, messages = sys.argv[1], sys.argv[2]
paths = set()
for line in open(messages, encoding="utf-8"):
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and copy + "#" in message.get("package_id", ""):
        paths.update(message.get("filenames") or [])
        if message.get("executable"):
            paths.add(message["executable"])
for path in paths:
    if not os.path.exists(path):
        continue
    # a binary is uplifted out of deps/ as a hard link: remove both names
    deps = os.path.join(os.path.dirname(path), "deps")
    if os.path.isdir(deps):
        inode = os.stat(path).st_ino
        for entry in os.scandir(deps):
            if entry.is_file(follow_symlinks=False) and entry.inode() == inode:
                os.remove(entry.path)
    os.remove(path)
PY
}

failed=0
summary=()
for dir in examples/*/; do
  dir="${dir%/}"
  name="$(basename "$dir")"
  [[ -f "$dir/src/main.rs" ]] || continue
  copy="$WORK/$name"
  mkdir -p "$copy"
  cp -R "$dir/src" "$copy/src"
  [[ -d "$dir/tests" ]] && cp -R "$dir/tests" "$copy/tests"
  cp "$dir/README.md" "$copy/README.md"
  cp "$dir"/*.json "$dir"/sample.* "$copy/" 2>/dev/null || true
  cp Cargo.lock "$copy/Cargo.lock"
  echo "== $name: $copy"
  if ! standalone_manifest "$ROOT/$dir" "$copy"; then
    failed=1
    summary+=("$name: refused (see above)")
    continue
  fi
  for features in "" "postgres" "mysql"; do
    label="${features:-default features}"
    # --offline, not --locked: cargo prunes the workspace's lock to the packages this
    # one crate uses, which --locked refuses; the versions stay the locked ones, and
    # same_versions checks that
    # `test --no-run`: the binary and its tests, built as `cargo test` would
    args=(test --no-run --manifest-path "$copy/Cargo.toml" --offline)
    [[ -n "$features" ]] && args+=(--features "$features")
    start=$SECONDS
    # diagnostics still rendered on stderr; the JSON on stdout says what was built
    if cargo "${args[@]}" --message-format=json-render-diagnostics >"$copy/artifacts.json"; then
      summary+=("$name ($label): built in $((SECONDS - start)) s")
    else
      failed=1
      summary+=("$name ($label): FAILED after $((SECONDS - start)) s")
    fi
    remove_artifacts "$copy" "$copy/artifacts.json"
  done
  if ! same_versions "$copy"; then
    failed=1
    summary+=("$name: resolved versions the workspace does not lock (see above)")
  fi
done

echo "== check-examples summary (target dir $CARGO_TARGET_DIR)"
printf '%s\n' "${summary[@]}"
exit "$failed"
