#!/usr/bin/env bash
# The sharded-sweep test on a real Slurm: installs Debian's slurm-wlm and munge when missing,
# starts a one-node cluster on localhost (munged, slurmctld and slurmd run directly, their
# configuration, state and logs in a temporary folder; no systemd, no cgroups), then
#   1. runs experiments/configs/slurm-smoke.json unsharded (the reference point set);
#   2. submits it as a 3-task array through scripts/slurm/submit.sh, SIGKILLs task 1's sweep
#      after its first group is recorded, and checks that the merge job reports the missing points
#      and that shard 1 owes them;
#   3. resubmits task 1 (`submit.sh ... --only 1`) and checks that the merged result holds
#      exactly the unsharded run's points, each once;
# and stops every daemon it started and removes the folder (also on failure or Ctrl-C).
# Packages it installs stay, as scripts/install_deps.sh's do.
#
# Needs root (to install packages and run slurmd) and build/vlrnn (scripts/build.sh).
# Bounded: the whole test is killed after VLRNN_SLURM_TEST_TIMEOUT seconds (default 300).
# VLRNN_SKIP_SLURM=1 skips it (for a machine without apt or root); without it, a machine
# where Slurm cannot be installed or started fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [[ ${VLRNN_SKIP_SLURM:-0} == 1 ]]; then
  echo "test_slurm.sh: SKIPPED (VLRNN_SKIP_SLURM=1)"
  exit 0
fi
limit=${VLRNN_SLURM_TEST_TIMEOUT:-300}
if [[ -z ${VLRNN_SLURM_TEST_BOUNDED:-} ]]; then
  # TERM at the limit runs the cleanup trap below; KILL 30 s later if even that hangs.
  exec env VLRNN_SLURM_TEST_BOUNDED=1 timeout --kill-after=30 "$limit" "$0" "$@"
fi

fail() {
  echo "test_slurm.sh: FAILED: $*" >&2
  exit 1
}
log() { echo "test_slurm.sh: [$((SECONDS))s] $*"; }

# --- install ---------------------------------------------------------------------------
((EUID == 0)) || fail "needs root (installs slurm-wlm and munge, runs slurmd); VLRNN_SKIP_SLURM=1 skips this test"
[[ -x build/vlrnn ]] || fail "build/vlrnn is missing: run scripts/build.sh first"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
   ! command -v munged >/dev/null; then
  log "installing slurm-wlm and munge (apt-get)"
  command -v apt-get >/dev/null || fail "no apt-get to install slurm-wlm and munge; VLRNN_SKIP_SLURM=1 skips this test"
  # Debian starts a package's daemon on install unless policy-rc.d says no: this test
  # starts its own, so none may be left running by the install.
  made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
  fi
  installed=0
  apt_get="$(dirname "$0")/apt_get.sh"  # apt-get, waiting for another apt's lock
  "$apt_get" install -y --no-install-recommends slurm-wlm munge >/dev/null ||
    { "$apt_get" update >/dev/null &&
      "$apt_get" install -y --no-install-recommends slurm-wlm munge >/dev/null; } && installed=1
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  ((installed)) || fail "apt-get install slurm-wlm munge failed; VLRNN_SKIP_SLURM=1 skips this test"
fi

# Debian's slurmd (22.05) loads its cgroup plugin even with proctrack/linuxproc and task/none
# below, and stops where no cgroup filesystem is mounted (a chroot or container without one).
# (/proc/mounts would not tell: in a chroot it lists the host's.) A mounted one is never empty.
[[ -n $(ls -A /sys/fs/cgroup 2>/dev/null) ]] ||
  fail "slurmd needs a cgroup filesystem at /sys/fs/cgroup, and none is mounted (in a chroot: mount --rbind /sys); VLRNN_SKIP_SLURM=1 skips this test"

# --- a one-node cluster in a temporary folder ------------------------------------------
tmp=$(mktemp -d /tmp/vlrnn-slurm-test.XXXXXX)
chmod 700 "$tmp"
pids=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -f $tmp/slurm.conf ]]; then
    # Jobs first (their processes are slurmstepd's, not the daemons' children), then daemons.
    SLURM_CONF=$tmp/slurm.conf scancel --full --signal=KILL --user=root >/dev/null 2>&1 || true
    for _ in $(seq 20); do
      [[ -z $(SLURM_CONF=$tmp/slurm.conf squeue -h 2>/dev/null) ]] && break
      sleep 0.5
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; --i)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Whatever is left of this cluster (a slurmstepd, a job's process) carries its SLURM_CONF,
  # a path no other process has: end those, by id.
  local proc
  for proc in /proc/[0-9]*; do
    [[ ${proc#/proc/} == "$$" ]] && continue
    if grep -qzxF "SLURM_CONF=$tmp/slurm.conf" "$proc/environ" 2>/dev/null; then
      kill -KILL "${proc#/proc/}" 2>/dev/null || true
    fi
  done
  if ((status != 0)) && [[ -d $tmp ]]; then
    for f in "$tmp"/*.log "$tmp"/sharded/logs/*; do
      [[ -f $f ]] && { echo "--- $f (last 20 lines)"; tail -n 20 "$f"; } >&2
    done
  fi
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "test_slurm.sh: FAILED: stopped by a signal (the ${limit} s limit, VLRNN_SLURM_TEST_TIMEOUT?)" >&2; exit 124' INT TERM

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
export SLURM_CONF=$tmp/slurm.conf
mkdir -p "$tmp/state" "$tmp/spool"
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge.key"
cat >"$SLURM_CONF" <<CONF
ClusterName=vlrnntest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

log "starting munged, slurmctld and slurmd ($tmp)"
# setsid: the daemons stay out of this script's process group, so the timeout's TERM
# reaches the script (whose trap stops the jobs, then the daemons) and not them first.
setsid munged --foreground --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" --pid-file="$tmp/munged.pid" \
  --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" >"$tmp/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 40); do [[ -S $tmp/munge.sock ]] && break; sleep 0.25; done
[[ -S $tmp/munge.sock ]] || fail "munged did not start"
setsid slurmctld -D -c -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids+=($!)
setsid slurmd -D -N "$host" -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  [[ $(sinfo -h -o %T 2>/dev/null) == idle* ]] && break
  sleep 0.5
done
[[ $(sinfo -h -o %T 2>/dev/null) == idle* ]] || fail "the local cluster did not come up: sinfo says '$(sinfo -h -o %T 2>&1)'"
log "cluster up: $(sinfo -h -o '%P %D node %c CPUs %T')"
if [[ ${1:-} == --cluster-only ]]; then
  # For debugging this script: a shell on the running test cluster.
  log "SLURM_CONF=$SLURM_CONF; exit the shell to stop the cluster"
  bash -i
  exit 0
fi

# --- the test ---------------------------------------------------------------------------
config=experiments/configs/slurm-smoke.json
shards=3
# The test is about sharding, not provenance: a checkout being edited may run it.
export VLRNN_ALLOW_DIRTY=1 VLRNN_SLURM_CPUS=1 VLRNN_SLURM_TIME=00:10:00 VLRNN_SLURM_MERGE_TIME=00:05:00 VLRNN_SLURM_PLOT=0

# JSON questions, answered by python3 (any python3: the standard library only).
keys_of() {  # the keys of DIR/results.jsonl, one a line, in file order
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    if line.strip(): print(json.loads(line)["key"])' "$1/results.jsonl"
}
job_state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_for_job() {  # JOB SECONDS: until it leaves the queue; prints its final state
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    case $(job_state "$1") in
      PENDING | RUNNING | COMPLETING | CONFIGURING | "") sleep 0.5 ;;
      *) job_state "$1"; return 0 ;;
    esac
  done
  fail "job $1 still $(job_state "$1") after $2 s"
}
vlrnn_pid() {  # VAR=VALUE...: the pid of a build/vlrnn whose environment has all of them
  local proc assignment
  for proc in /proc/[0-9]*; do
    [[ $(readlink "$proc/exe" 2>/dev/null) == "$root/build/vlrnn" ]] || continue
    for assignment in "$@"; do
      grep -qzxF "$assignment" "$proc/environ" 2>/dev/null || continue 2
    done
    echo "${proc#/proc/}"
    return 0
  done
  return 1
}
submit() {  # ARGS...: sets array_job and merge_job
  local output
  output=$(scripts/slurm/submit.sh "$config" "$shards" --out "$tmp/sharded" "$@")
  array_job=$(sed -n 's/^array_job=//p' <<<"$output")
  merge_job=$(sed -n 's/^merge_job=//p' <<<"$output")
  [[ -n $array_job && -n $merge_job ]] || fail "submit.sh printed no job ids: $output"
}

log "1. the unsharded reference run"
build/vlrnn sweep "$config" --out "$tmp/whole" --threads 1 --allow-dirty 2>"$tmp/whole.log" || fail "the unsharded sweep failed"
keys_of "$tmp/whole" | sort >"$tmp/whole.keys"
total=$(wc -l <"$tmp/whole.keys")
((total == 12)) || fail "the unsharded run recorded $total points, expected 12"
shard1=$(build/vlrnn sweep "$config" --shard 1/$shards --dry-run 2>/dev/null | wc -l)
log "   $total points; shard 1/$shards owns $shard1"

log "2. the sweep as a $shards-task array; task 1 is killed (SIGKILL) after its first group"
submit
deadline=$((SECONDS + 120))
# Its process first, found while it measures its first group: the kill then follows the
# first record within a poll, where a search of /proc after it could find the task gone
# (its last group takes about 2 s).
until pid=$(vlrnn_pid "SLURM_ARRAY_JOB_ID=$array_job" "SLURM_ARRAY_TASK_ID=1"); do
  ((SECONDS < deadline)) || fail "found no vlrnn process of task ${array_job}_1 in 120 s (task state: $(job_state "${array_job}_1"))"
  sleep 0.1
done
until [[ -s $tmp/sharded/shard-1/results.jsonl ]]; do
  ((SECONDS < deadline)) || fail "shard 1 recorded nothing in 120 s (task state: $(job_state "${array_job}_1"))"
  sleep 0.1
done
# SIGKILL, as the OOM killer or a dying node would: no chance to finish the point. (Slurm's
# own `scancel --signal=KILL` is a polite cancel: SIGTERM first, which the sweep answers by
# finishing its current point.) A task already gone is the check below's "too late"; its
# pid is checked first, as no other process may get the signal.
if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$root/build/vlrnn" ]]; then
  kill -KILL "$pid" 2>/dev/null || true
fi
state=$(wait_for_job "$merge_job" 120)
recorded=$(keys_of "$tmp/sharded/shard-1" | wc -l)
log "   task 1 killed with $recorded of its $shard1 points recorded; first merge job: $state"
((recorded < shard1)) || fail "the kill came too late: shard 1 had finished (make its last group slower)"
[[ $state == FAILED ]] || fail "the merge of an incomplete sweep should fail (exit 3), got $state"
merge_log=$tmp/sharded/logs/merge-$merge_job.out
grep -q "INCOMPLETE: $((shard1 - recorded)) of $total points missing" "$merge_log" ||
  fail "the merge log does not report $((shard1 - recorded)) missing points: $(cat "$merge_log")"
grep -q "shard 1/$shards owes $((shard1 - recorded)) points" "$merge_log" ||
  fail "the merge log does not name shard 1 as the one owing them: $(cat "$merge_log")"
grep -q -- "--only 1" "$merge_log" || fail "the merge log gives no resubmit hint: $(cat "$merge_log")"
log "   the merge job said: $(grep -E 'INCOMPLETE|owes' "$merge_log" | tr -s ' \n' ' ')"

log "3. task 1 resubmitted (submit.sh --only 1): it resumes, the merge completes"
submit --only 1
state=$(wait_for_job "$merge_job" 120)
[[ $state == COMPLETED ]] || fail "the second merge job ended $state: $(cat "$tmp/sharded/logs/merge-$merge_job.out")"
keys_of "$tmp/sharded/merged" >"$tmp/merged.keys"
[[ $(sort "$tmp/merged.keys" | uniq -d) == "" ]] || fail "the merged set holds duplicates: $(sort "$tmp/merged.keys" | uniq -d)"
sort "$tmp/merged.keys" | diff "$tmp/whole.keys" - >"$tmp/diff" ||
  fail "the merged points differ from the unsharded run's: $(cat "$tmp/diff")"
[[ $(keys_of "$tmp/sharded/shard-1" | sort | uniq -d) == "" ]] || fail "the resumed shard 1 recorded a point twice"
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); assert m["status"] == "complete" and \
m["points_missing"] == 0 and len(m["merged_from"]) == 3, m["status"]' "$tmp/sharded/merged/meta.json" ||
  fail "the merged meta.json is not complete"

log "4. data-parallel training, srun -n 2 (train.sbatch): straight, and rank 1 killed and resubmitted"
cat >"$tmp/train.json" <<'JSON'
{"name": "slurm-train", "task": {"kind": "copy", "delay": 40, "symbols": 2, "alphabet": 4, "min_length": 0.5},
 "model": {"kind": "lstm", "hidden": 6}, "methods": ["vlrnn:block_length=4"], "seeds": [1],
 "batch": 5, "optimizer_steps": 200, "dtype": "float64",
 "optimizer": {"kind": "adam", "lr": 0.01},
 "eval_every": 100, "eval_batches": 1, "checkpoint_every": 5}
JSON
build/vlrnn train "$tmp/train.json" --out "$tmp/train-one" --allow-dirty >"$tmp/train-one.log" 2>&1 ||
  fail "the one-process training run failed"
submit_train() {  # OUT: sets train_job
  train_job=$(sbatch --parsable --ntasks=2 --time=00:10:00 --output="$tmp/train-%j.log" \
                scripts/slurm/train.sbatch "$tmp/train.json" "$1") || fail "sbatch train.sbatch failed"
}
submit_train "$tmp/train-straight"
state=$(wait_for_job "$train_job" 180)
[[ $state == COMPLETED ]] || fail "the 2-rank training job ended $state: $(tail -5 "$tmp/train-$train_job.log")"
submit_train "$tmp/train-killed"
deadline=$((SECONDS + 120))
# Rank 1 found first: a scan of /proc can outlast the whole run (200 steps in ~2 s), so
# once the first checkpoint is there, the kill follows at once.
pid=""
until [[ -n $pid ]]; do
  ((SECONDS < deadline)) || fail "found no rank-1 vlrnn of job $train_job in 120 s (state $(job_state "$train_job"))"
  pid=$(vlrnn_pid "SLURM_JOB_ID=$train_job" "SLURM_PROCID=1") || sleep 0.1
done
until [[ -n $(ls "$tmp/train-killed/checkpoints" 2>/dev/null) ]]; do
  ((SECONDS < deadline)) || fail "the training job checkpointed nothing in 120 s (state $(job_state "$train_job"))"
  sleep 0.02
done
kill -KILL "$pid"
state=$(wait_for_job "$train_job" 120)
[[ $state == FAILED ]] || fail "the training job with a killed rank ended $state, expected FAILED"
steps_done=$(grep -c '"kind":"train_step"' "$tmp/train-killed/results.jsonl" || true)
log "   rank 1 killed after $steps_done of 200 steps were recorded; the job ended $state"
((steps_done < 200)) || fail "the kill came too late: the run had finished"
submit_train "$tmp/train-killed"
state=$(wait_for_job "$train_job" 180)
[[ $state == COMPLETED ]] || fail "the resubmitted training job ended $state: $(tail -5 "$tmp/train-$train_job.log")"
# Killed and resumed = never killed, bit for bit; 2 ranks = 1 process to 1e-10 over the
# first 20 steps (after that, Adam carries the sums' different rounding along a trajectory).
python3 - "$tmp/train-killed" "$tmp/train-straight" "$tmp/train-one" <<'PY' ||
import json, sys
def steps(folder):
    return {r["step"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, open(folder + "/results.jsonl"))
            if r["kind"] == "train_step"}
killed, straight, one = (steps(f) for f in sys.argv[1:])
assert sorted(killed) == list(range(1, 201)), len(killed)
assert killed == straight, "resumed != straight"
worst = max(abs(g - w) / abs(w) for k in range(1, 21) for g, w in zip(straight[k], one[k]))
assert worst < 1e-10, worst
assert json.load(open(sys.argv[1] + "/meta.json"))["world_size"] == 2
PY
  fail "the killed and resumed 2-rank run differs from the straight one, or 2 ranks from 1 process"
log "   resubmitted: its 200 steps equal the never-killed job's bit for bit, and the first 20 one process's"

log "PASSED: $total points sharded $shards ways, one task killed and resubmitted, merged = unsharded; 2-rank training (srun -n 2) killed and resumed = never killed"
