#!/usr/bin/env bats
# The swarm benchmark's smoke run (hack/bench/swarm --quick): two sessions
# and two git worktrees build a generated C project; every publish lands,
# the head equals git's main after the merges, and the table is complete;
# two unattended retry loops land and leave no conflict marker.

bats_require_minimum_version 1.5.0
load helpers

@test "hack/bench/swarm --quick: both sides build, publish and agree" {
  command -v gcc >/dev/null && command -v make >/dev/null || skip "needs gcc and make"
  run "$ESBX_SRC/hack/bench/swarm" --quick
  echo "$output" >&2
  assert_success
  assert_output --partial "All 2 publishes landed without a conflict; the project's head equals main"
  assert_output --regexp "Retry unattended: 2 loops at once, 2 landed, 0 wait for a person \(exit 4\), [0-9]+ rebases, .*; no conflict marker in the head\."
  for row in "create: \`session create\`" "build: \`make -j1\`" "build: CPU time" \
    "publish vs \`commit -a\`" "disk after the builds: workspaces" "disk after the builds: with the base"; do
    assert_line --regexp "^\| ${row//\`/.}.* \| [0-9.]+ (ms|s|MiB) \| [0-9.]+ (ms|s|MiB) \| [0-9.]+ \|$"
  done
}
