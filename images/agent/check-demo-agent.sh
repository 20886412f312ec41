#!/bin/sh
# Checks the demo tenant's scripted agent without cyclix, podman or Rust: lays demo/project out as
# a fresh git repository, shows its test failing, runs images/agent/cyclix-demo-agent there with
# HOME unset (as in a read-only container), and checks that the tests then pass, that exactly
# one line of calc/__init__.py changed in one new commit, that the tree is clean, and that a
# second run refuses (exit 2: bug not found).
#
# Needs python3 with pytest and git on PATH. Usage: sh images/agent/check-demo-agent.sh
set -eu
fail() { echo "check-demo-agent: FAIL: $*" >&2; exit 1; }
python3 -c 'import pytest' 2>/dev/null || fail "python3 cannot import pytest (install python3-pytest or use a venv)"
command -v git >/dev/null || fail "git is not on PATH"
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cyclix-demo-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -R "$top/demo/project" "$work/project"
cp "$top/demo/task.md" "$work/task.md"
cd "$work/project"
export PYTHONDONTWRITEBYTECODE=1
g() { git -c user.name=check -c user.email=check@cyclix.invalid "$@"; }
g init -q -b main
g add -A
g commit -q -m "demo project"
base=$(git rev-parse HEAD)

if python3 -m pytest -q -p no:cacheprovider >/dev/null 2>&1; then
    fail "the demo project's tests pass before the agent ran (the bug is missing)"
fi
env -u HOME CYCLIX_TASK="$work/task.md" "$top/images/agent/cyclix-demo-agent" \
    || fail "the agent exited with status $?"
python3 -m pytest -q -p no:cacheprovider || fail "the tests fail after the agent ran"
[ "$(git rev-list --count "$base"..HEAD)" = 1 ] || fail "expected exactly one new commit"
[ "$(git diff --name-only "$base" HEAD)" = "calc/__init__.py" ] || fail "the commit touches other files"
[ "$(git diff --numstat "$base" HEAD)" = "$(printf '1\t1\tcalc/__init__.py')" ] \
    || fail "the commit changes more than one line"
[ -z "$(git status --porcelain --ignored)" ] || fail "the agent left files behind: $(git status --porcelain --ignored)"
set +e
env -u HOME CYCLIX_TASK="$work/task.md" "$top/images/agent/cyclix-demo-agent" >/dev/null 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "a second run should exit 2 (bug not found), got $rc"
echo "check-demo-agent: OK ($(git log -1 --format='%h %an <%ae>: %s'))"
