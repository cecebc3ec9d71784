#!/usr/bin/env bash
# Runs the commands README.md and the example READMEs give a newcomer, as written, at
# the root of this repository, and checks they do what the text says:
#
# - README.md's "## Examples" block: `cargo run -p example-github`, then the
#   `hookbox send … --event push` whose answers the comment lines below it show; and
#   the `hookbox verify` under "## Try it", whose answer its comment shows;
# - each listed example README's "## Run it" blocks and the inbox/table block after
#   them: the receiver, the signed sample sent twice (its answers must be the
#   ```text block under "## What to expect"), then `hookbox inbox … stats` and
#   `sqlite3 …`, whose output must hold what the `# …` comment after each says
#   (`…` stands for anything).
#
# A `cargo run -p example-…` line starts the receiver in the background and waits for
# its `listening on` line; `export NAME=value` carries over to later commands. The
# receivers listen on port 3000 as the READMEs say, so the port must be free. Each
# example's SQLite file is removed before and after its run.
#
# With `--project <dir> <provider>` it runs the README of a project `hookbox new`
# wrote in <dir> the same way, in that directory (`cargo run`, `hookbox send …
# --body-file sample.json`, with `hookbox` on PATH); scripts/check-new.sh does that.
#
# Usage: scripts/check-readme-commands.sh [example …]   (default: github svix standard)
#        scripts/check-readme-commands.sh --project <dir> <provider>
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
if [ "${1:-}" = "--project" ]; then
  mode=project
  shift
  [ "$#" -eq 2 ] || { echo "usage: $0 --project <dir> <provider>" >&2; exit 2; }
  # build first, so a receiver's start is not a compile against the timeouts
  (cd "$1" && cargo build --quiet --offline)
else
  mode=repository
  # the commands build and run in the workspace's own target directory, as a reader's do
  examples=("$@")
  [ "${#examples[@]}" -eq 0 ] && examples=(github svix standard)
  set -- "$ROOT" "${examples[@]}"
  cargo build --quiet -p hookbox-cli $(printf -- '-p example-%s ' "${examples[@]}")
fi

python3 - "$mode" "$@" <<'PY'
import os, re, signal, subprocess, sys, time

mode, root, examples = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
failures = []

def blocks(text, lang):
    """Every ```lang block as (heading it sits under, its text), in order."""
    out, heading = [], ""
    for match in re.finditer(r"^(## [^\n]*)$|^```" + lang + r"\n(.*?)^```$", text, re.S | re.M):
        if match.group(1):
            heading = match.group(1)
        else:
            out.append((heading, match.group(2)))
    return out

def commands(block):
    """The block's commands, continuation lines joined, each with the comment lines
    that follow it (expected output) and its trailing `# …` comment."""
    out = []
    pending = ""
    for line in block.splitlines():
        if pending:
            pending += "\n" + line
        elif line.startswith("#"):
            if out:
                out[-1]["after"].append(line[1:].strip())
            continue
        elif line.strip():
            pending = line
        if pending and not pending.endswith("\\"):
            command, comment = pending, ""
            # a trailing comment: `   # …` after the command (not inside quotes)
            last = command.splitlines()[-1]
            hit = re.search(r"\s{2,}# (.*)$", last)
            if hit:
                comment = hit.group(1)
                command = command[: len(command) - len(last)] + last[: hit.start()]
            out.append({"command": command.strip(), "comment": comment, "after": []})
            pending = ""
    return out

def contains(output, expected, whole=False):
    """`expected` (with `…` standing for anything) is in `output` (is all of it, when
    `whole`)."""
    # `<unix time>` and `...` are placeholders too
    expected = re.sub(r"<[^>]+>", "…", expected).replace("...", "…")
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    if whole:
        return re.fullmatch(pattern, output, re.S) is not None
    return re.search(pattern, output, re.S) is not None

class Receiver:
    def __init__(self, command, env):
        self.command = command
        self.proc = subprocess.Popen(["bash", "-c", "exec " + command], cwd=root, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError(f"{command}: first line {line!r}, not `listening on`\n{err}")
    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)

def run(readme, steps, expect_text=None):
    """Runs `steps` (commands from `readme`) in order; returns nothing, records failures."""
    env = dict(os.environ)
    for var in ("WEBHOOK_SECRET", "HOOKBOX_STORE", "HOOKBOX_REDIS_URL", "PORT", "METRICS_PORT"):
        env.pop(var, None)
    receivers = []
    try:
        for step in steps:
            command = step["command"]
            print(f"$ {command}", flush=True)
            export = re.fullmatch(r"export (\w+)=(\S+)", command)
            if export:
                env[export.group(1)] = export.group(2)
                continue
            if re.match(r"(\w+=\S+ )*cargo run(\s|$)", command) and "-p hookbox-cli" not in command:
                receivers.append(Receiver(command, env))
                continue
            # a command whose comment shows what the worker applied may run before the
            # worker got to it: it is retried for up to 10 s until its output says so
            for _ in range(20):
                result = subprocess.run(["bash", "-c", command], cwd=root, env=env,
                                        capture_output=True, text=True, timeout=120)
                output = result.stdout
                if result.returncode != 0 or not step["comment"] or contains(output, step["comment"]):
                    break
                time.sleep(0.5)
            print(output, end="", flush=True)
            if result.returncode != 0:
                failures.append(f"{readme}: `{command}` exited {result.returncode}: {result.stderr}")
                continue
            if step["comment"] and not contains(output, step["comment"]):
                failures.append(f"{readme}: `{command}` printed {output!r}, not {step['comment']!r}")
            wanted = [line for line in step["after"] if line.startswith("{")]
            if "send" in command and expect_text is not None:
                wanted = expect_text
            got = output.splitlines()
            if wanted and (len(got) != len(wanted)
                           or not all(contains(g, w, whole=True) for g, w in zip(got, wanted))):
                failures.append(f"{readme}: `{command}` printed {output.splitlines()!r}, not {wanted!r}")
    except Exception as err:  # a receiver that never listened, a timeout
        failures.append(f"{readme}: {err}")
    finally:
        for receiver in receivers:
            receiver.stop()

def clean(example):
    for suffix in ("", "-shm", "-wal"):
        try:
            os.remove(os.path.join(root, f"hookbox-{example}.db{suffix}"))
        except FileNotFoundError:
            pass

if mode == "repository":
    # README.md: the block under "## Examples"
    readme = open(os.path.join(root, "README.md")).read()
    steps = [c for heading, block in blocks(readme, "sh") if heading == "## Examples"
             for c in commands(block)][:2]
    assert len(steps) == 2 and "example-github" in steps[0]["command"], steps
    # and `hookbox verify` under "## Try it", whose answer the comment shows
    steps += [c for heading, block in blocks(readme, "sh") if heading == "## Try it"
              for c in commands(block) if " -- verify " in c["command"]]
    assert len(steps) == 3, steps
    print("== README.md: ## Examples, ## Try it (verify)", flush=True)
    clean("github")
    run("README.md", steps)
    clean("github")

for example in examples:
    path = f"examples/{example}/README.md" if mode == "repository" else "README.md"
    text = open(os.path.join(root, path)).read()
    sh = blocks(text, "sh")
    # "## Run it" (the receiver, then the send) and the first block after it (the inbox
    # and the table)
    run_it = [c for heading, block in sh if heading == "## Run it" for c in commands(block)]
    after = [block for heading, block in sh if heading == "## What to expect"][:1]
    steps = run_it + [c for block in after for c in commands(block)]
    expect = [block for heading, block in blocks(text, "text") if heading == "## What to expect"]
    expect_text = [line for line in expect[0].splitlines() if line.startswith("{")] if expect else None
    print(f"== {path}", flush=True)
    clean(example)
    run(path, steps, expect_text)
    clean(example)

if failures:
    print("\n".join(["== check-readme-commands: FAILED"] + failures), file=sys.stderr)
    sys.exit(1)
print("== check-readme-commands: every command ran as written and printed what its README says")
PY
