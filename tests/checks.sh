# Sourced by the shell tests: counters, a temporary directory removed on
# exit, and the check helpers.  check NAME CONDITION evaluates CONDITION
# (a shell expression) and counts it; checks_done prints the counts and
# returns non-zero when one failed.
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
checks_done() {
  echo "${1:+$1: }$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
