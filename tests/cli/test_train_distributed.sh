#!/usr/bin/env bash
# `vlrnn train` on 2 ranks (two processes, c10d's gloo on localhost) against 1 process on the
# same global batches (NOTE [ Data-parallel training ] in experiments/lib/trainer.h):
#   - every step's loss and gradient norm equal to 1e-10 (float64; only the sum's order
#     differs), for vlrnn, the planner, checkpoint and full, with an uneven split (3 + 2);
#   - a rank killed mid-run ends the other with an error within VLRNN_DIST_TIMEOUT_S, and the
#     two resumed from the last checkpoint end with the losses of a run that never died;
#   - ranks started with different configs stop at the start, naming the config.
# Exit 77 (skipped): this vlrnn was built without c10d's gloo.
# Usage: test_train_distributed.sh path/to/vlrnn
set -euo pipefail
vlrnn=$(realpath "${1:?usage: test_train_distributed.sh path/to/vlrnn}")
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
cat > "$work/config.json" <<'JSON'
{
  "name": "ranks",
  "task": {"kind": "copy", "delay": 6, "symbols": 2, "alphabet": 4, "min_length": 0.5},
  "model": {"kind": "lstm", "hidden": 6},
  "methods": ["vlrnn:block_length=4", "planner:percent=30", "checkpoint", "full"],
  "seeds": [1],
  "batch": 5, "optimizer_steps": 40, "dtype": "float64",
  "optimizer": {"kind": "adam", "lr": 0.01},
  "eval_every": 20, "eval_batches": 1, "checkpoint_every": 5
}
JSON
free_port() { /usr/bin/env python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Starts rank $1 of 2 on port $2 with the remaining arguments; its pid in $! as usual.
rank() {
  local r=$1 port=$2; shift 2
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port VLRNN_DIST_TIMEOUT_S=10 \
    "$vlrnn" train "$@" --allow-dirty > "$work/rank$r.log" 2>&1 &
}
# Runs both ranks to the end; fails when either fails.
two_ranks() {
  local port; port=$(free_port)
  rank 0 "$port" "$@"; local p0=$!
  rank 1 "$port" "$@"; local p1=$!
  pids=("$p0" "$p1")
  local rc0=0 rc1=0
  wait "$p0" || rc0=$?
  wait "$p1" || rc1=$?
  if ((rc0 != 0 || rc1 != 0)); then
    echo "FAIL: ranks exited $rc0 and $rc1"; tail -5 "$work/rank0.log" "$work/rank1.log"; exit 1
  fi
}
# Every step's loss and gradient norm of folder $1 against folder $2, to 1e-10 relative.
compare() { /usr/bin/env python3 - "$1" "$2" <<'PY'
import json, sys
def steps(folder):
    out = {}
    for line in open(folder + "/results.jsonl"):
        r = json.loads(line)
        if r["kind"] == "train_step":
            out[(r["run"], r["step"])] = (r["loss"], r["grad_norm"], r.get("eval_loss"))
    return out
got, want = steps(sys.argv[1]), steps(sys.argv[2])
assert got.keys() == want.keys() and len(want) == 160, (len(got), len(want))
worst = max(abs(g - w) / abs(w) for k in want for g, w in zip(got[k], want[k]) if w)
assert worst < 1e-10, f"worst relative difference {worst:.2e}"
print(f"{len(want)} steps, worst relative difference {worst:.1e}")
PY
}

if ! "$vlrnn" train --help | grep -q "data-parallel"; then
  echo "SKIP: vlrnn train has no data-parallel mode"; exit 77
fi
"$vlrnn" train "$work/config.json" --out "$work/one" --allow-dirty > "$work/one.log" 2>&1
two_ranks "$work/config.json" --out "$work/two"
if grep -q "built without it" "$work/rank0.log"; then echo "SKIP: built without gloo"; exit 77; fi
echo "2 ranks against 1 process: $(compare "$work/two" "$work/one")"
/usr/bin/env python3 - "$work/two" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1] + "/meta.json"))
assert meta["world_size"] == 2, meta.get("world_size")
runs = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl") if '"train_run"' in l]
assert len(runs) == 4 and all(r["world_size"] == 2 for r in runs), runs
PY
[[ ! -e "$work/two/rank1" ]] && ! grep -q "step" "$work/rank1.log" ||
  { echo "FAIL: rank 1 wrote or printed what rank 0 alone should"; exit 1; }

# Kill rank 1 (SIGKILL: no goodbye) once rank 0 has checkpointed; rank 0 must stop with an
# error naming the failed all-reduce, well within the 10 s timeout.
port=$(free_port)
rank 0 "$port" "$work/config.json" --out "$work/killed"; p0=$!
rank 1 "$port" "$work/config.json" --out "$work/killed"; p1=$!
pids=("$p0" "$p1")
for _ in $(seq 1 1200); do
  [[ -n $(ls "$work/killed/checkpoints" 2>/dev/null) ]] && break
  sleep 0.05
done
kill -0 "$p1" 2>/dev/null || { echo "FAIL: rank 1 ended before it could be killed"; exit 1; }
kill -KILL "$p1"
wait "$p1" 2>/dev/null || true
start=$SECONDS
rc=0
wait "$p0" || rc=$?
waited=$((SECONDS - start))
((rc != 0)) || { echo "FAIL: rank 0 finished although rank 1 was killed"; exit 1; }
grep -q "an all-reduce failed" "$work/rank0.log" ||
  { echo "FAIL: rank 0's error does not name the all-reduce:"; tail -3 "$work/rank0.log"; exit 1; }
((waited <= 15)) || { echo "FAIL: rank 0 took ${waited} s to stop (timeout 10 s)"; exit 1; }
two_ranks "$work/config.json" --out "$work/killed" --resume
diff <(compare "$work/killed" "$work/two") <(compare "$work/two" "$work/two") > /dev/null || {
  echo "FAIL: the resumed ranks' losses differ from the straight run's:"
  compare "$work/killed" "$work/two"; exit 1; }
echo "killed rank 1: rank 0 stopped in ${waited} s (rc $rc); resumed, identical to the straight run"

# Ranks with different configs stop at the start.
sed 's/"optimizer_steps": 40/"optimizer_steps": 41/' "$work/config.json" > "$work/other.json"
port=$(free_port)
rank 0 "$port" "$work/config.json" --out "$work/mismatch"; p0=$!
rank 1 "$port" "$work/other.json" --out "$work/mismatch"; p1=$!
pids=("$p0" "$p1")
rc0=0 rc1=0
wait "$p0" || rc0=$?
wait "$p1" || rc1=$?
((rc0 != 0 && rc1 != 0)) || { echo "FAIL: mismatched ranks exited $rc0 and $rc1"; exit 1; }
grep -q "ranks disagree on the config" "$work/rank0.log" "$work/rank1.log" ||
  { echo "FAIL: no error naming the config:"; tail -3 "$work/rank0.log"; exit 1; }
echo "ranks with different configs: both stopped at the start, naming the config"
