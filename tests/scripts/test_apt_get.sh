#!/usr/bin/env bash
# scripts/apt_get.sh against a stand-in apt-get on PATH: a run that failed on apt's lock is
# tried again until it succeeds; any other failure, or a lock held past VLRNN_APT_WAIT, ends
# it with apt-get's status and message.
# Usage: test_apt_get.sh <source dir>
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The stand-in fails its first $LOCKED runs as a held lock does, then does $THEN.
mkdir "$work/bin"
cat > "$work/bin/apt-get" <<'STUB'
#!/usr/bin/env bash
count=$(( $(cat "$STUB_COUNT" 2>/dev/null || echo 0) + 1 ))
echo "$count" > "$STUB_COUNT"
if ((count <= LOCKED)); then
  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 42 (apt-get)" >&2
  exit 100
fi
[[ $THEN == ok ]] && { echo "stand-in ran: $*"; exit 0; }
echo "E: Unable to locate package $*" >&2
exit 100
STUB
chmod +x "$work/bin/apt-get"

run() {  # LOCKED THEN WAIT: apt_get.sh's status; its output in $work/out, $work/err
  rm -f "$work/count"
  set +e
  PATH="$work/bin:$PATH" STUB_COUNT="$work/count" LOCKED=$1 THEN=$2 VLRNN_APT_WAIT=$3 \
    VLRNN_APT_RETRY_S=0 "$source_dir/scripts/apt_get.sh" install -y demo > "$work/out" 2> "$work/err"
  local status=$?
  set -e
  return $status
}

run 2 ok 60 || fail "a lock held for two runs: expected success, got $? ($(cat "$work/err"))"
[[ $(cat "$work/count") == 3 ]] || fail "expected 3 runs, got $(cat "$work/count")"
grep -q "DPkg::Lock::Timeout=60 install -y demo" "$work/out" || fail "arguments: $(cat "$work/out")"
grep -q "holds its lock; trying again" "$work/err" || fail "no word of the wait"

if run 0 missing 60; then fail "a missing package: expected failure"; else status=$?; fi
((status == 100)) || fail "a missing package: expected apt-get's status 100, got $status"
[[ $(cat "$work/count") == 1 ]] || fail "a failure other than a lock was tried again"
grep -q "Unable to locate package" "$work/err" || fail "apt-get's message was lost"

if run 1000 ok 0; then fail "a lock held past the wait: expected failure"; else status=$?; fi
((status == 100)) || fail "a lock held past the wait: expected status 100, got $status"
grep -q "Could not get lock" "$work/err" || fail "the lock's message was lost"
echo "apt_get.sh: retries on a held lock, passes other failures through, gives up in time"
