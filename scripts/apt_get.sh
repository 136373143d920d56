#!/usr/bin/env bash
# apt-get "$@" (as root), waiting for another apt or dpkg to finish instead of failing: on a
# fresh machine, apt's daily update or unattended upgrades may hold its locks for a while
# after boot. apt-get waits for dpkg's lock when told to (DPkg::Lock::Timeout), but not for
# the package lists' lock that `update` takes, so a run that failed on a lock is tried again
# every VLRNN_APT_RETRY_S seconds (default 5), for up to VLRNN_APT_WAIT (default 600).
set -uo pipefail

wait_s=${VLRNN_APT_WAIT:-600}
retry_s=${VLRNN_APT_RETRY_S:-5}
deadline=$((SECONDS + wait_s))
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
while true; do
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$wait_s" "$@" 2> "$errors"
  status=$?
  cat "$errors" >&2
  if ((status == 0)) || ! grep -q "Could not get lock" "$errors" || ((SECONDS >= deadline)); then
    exit "$status"
  fi
  echo "apt_get.sh: another apt or dpkg holds its lock; trying again in $retry_s s" >&2
  sleep "$retry_s"
done
