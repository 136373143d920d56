#!/usr/bin/env bash
# Every command's results hold the results schema (scripts/results_schema.py): tiny runs of
# sweep (two shards, then merge), compare --json (and --plan from it, in compare and in a
# sweep), budget, train (and --plan from a planner's run), verify --out and --json, and the
# benchmark scripts' writers (scripts/bench_meta.py + bench_to_records.py on a committed
# Google Benchmark file), each checked by the schema. Also checks that the checker fails on a
# set with an old key name, so a pass means something.
#   test_results_schema.sh path/to/vlrnn SOURCE_DIR
set -uo pipefail
vlrnn=$(realpath "${1:?usage: test_results_schema.sh path/to/vlrnn SOURCE_DIR}")
source_dir=$(realpath "${2:?usage: test_results_schema.sh path/to/vlrnn SOURCE_DIR}")
python=/usr/bin/python3
[[ -x $python ]] || python=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
run() {  # "what" command...: must exit 0
  local what=$1
  shift
  if "$@" > "$work/last.log" 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what (exit $?)"
    sed 's/^/    /' "$work/last.log" | tail -15
    failures=$((failures + 1))
  fi
}

cat > sweep.json <<'JSON'
{"name": "tiny", "models": ["rnn"], "input": 2, "classes": 2,
 "experiments": [{"methods": ["full", "vlrnn"], "T": [4, 8], "batch": 2, "hidden": 3,
                  "block_length": [2], "repeats": 1, "warmup": 0, "figures": ["memory_vs_T"]}]}
JSON
echo '{"task": {"kind": "adding", "time_steps": 8}, "methods": ["full"],
      "optimizer_steps": 2}' > train.json
common=(--allow-dirty)
run "sweep shard 1/2" "$vlrnn" sweep sweep.json --out shard0 --shard 0/2 "${common[@]}"
run "sweep shard 2/2" "$vlrnn" sweep sweep.json --out shard1 --shard 1/2 "${common[@]}"
run "merge" "$vlrnn" merge merged shard0 shard1
run "compare --json" "$vlrnn" compare --T 8 --hidden 4 --input 2 --batch 2 --repeats 2 \
  --warmup 0 --methods full,vlrnn,planner:percent=50 --json compare.json --quiet "${common[@]}"
# The planner's recorded plan, repeated exactly (NOTE [ Recorded plans ]).
run "compare --plan" "$vlrnn" compare --T 8 --hidden 4 --input 2 --batch 2 --repeats 1 \
  --warmup 0 --methods full --plan compare.json --json compare_plan.json --quiet "${common[@]}"
run "the repeated plan is the recorded one" "$python" - <<'PY'
import json
planned = [r for r in json.load(open("compare.json"))["records"] if r["method_name"] == "planner"]
repeated = [r for r in json.load(open("compare_plan.json"))["records"] if r["method_name"] == "plan"]
assert len(planned) == 1 and len(repeated) == 1, (len(planned), len(repeated))
assert planned[0]["plan"]["ops"] == repeated[0]["plan"]["ops"], "the ops differ"
assert repeated[0]["plan"]["source"] == "compare.json", repeated[0]["plan"]
assert repeated[0]["error_vs_full"]["max_rel"] <= 1e-5, repeated[0]["error_vs_full"]
assert "cost_model" in planned[0]["plan"] and planned[0]["plan"]["budget_bytes"] > 0
PY
# METHOD@KIND: LibTorch's LSTM and lstm_block side by side on one set of weights.
run "compare METHOD@KIND" "$vlrnn" compare --model lstm --T 8 --hidden 4 --input 2 --batch 2 \
  --repeats 1 --warmup 0 --methods full,full@lstm_block --json compare_kinds.json --quiet \
  --check "${common[@]}"
# The same plan in a sweep (--plan registers the method "plan" for its config).
cat > sweep_plan.json <<'JSON'
{"name": "planned", "models": ["lstm"], "input": 2,
 "experiments": [{"methods": ["full", "plan"], "T": [8], "batch": 2, "hidden": 4,
                  "repeats": 1, "warmup": 0}]}
JSON
run "sweep --plan" "$vlrnn" sweep sweep_plan.json --out sweep_plan --plan compare.json "${common[@]}"
run "the sweep ran the recorded plan" "$python" - <<'PY'
import json
planned = [r for r in json.load(open("compare.json"))["records"] if r["method_name"] == "planner"]
swept = [json.loads(l) for l in open("sweep_plan/results.jsonl")]
swept = [r for r in swept if r.get("method") == "plan"]
assert len(swept) == 1 and swept[0]["status"] == "ok", swept
assert swept[0]["plan"]["ops"] == planned[0]["plan"]["ops"], "the ops differ"
PY
run "budget" "$vlrnn" budget --T 16 --hidden 4 --input 2 --batch 2 --classes 2 --repeats 1 \
  --warmup 0 --fractions 0.6 --methods planner,uniform --out budget "${common[@]}"
run "train" "$vlrnn" train train.json --out train "${common[@]}"
# A planner's training run, repeated from the plan its record keeps: the same losses, bit
# for bit (NOTE [ Recorded plans ]).
echo '{"task": {"kind": "adding", "time_steps": 16}, "methods": ["planner:percent=50"],
       "optimizer_steps": 3, "batch": 4,
       "model": {"kind": "lstm", "hidden": 8}}' > train_planner.json
sed 's/"planner:percent=50"/"plan"/' train_planner.json > train_plan.json
run "train a planner" "$vlrnn" train train_planner.json --out train_planner "${common[@]}"
run "train --plan" "$vlrnn" train train_plan.json --out train_plan \
  --plan train_planner/results.jsonl "${common[@]}"
run "the repeated training run has the same losses" "$python" - <<'PY'
import json
def records(folder, kind):
    return [r for r in map(json.loads, open(folder + "/results.jsonl")) if r.get("kind") == kind]
planned, repeated = records("train_planner", "train_step"), records("train_plan", "train_step")
assert len(planned) == 3 and [r["loss"] for r in planned] == [r["loss"] for r in repeated], \
    ([r["loss"] for r in planned], [r["loss"] for r in repeated])
runs = records("train_planner", "train_run") + records("train_plan", "train_run")
assert runs[0]["plan"]["ops"] == runs[1]["plan"]["ops"] and runs[1]["plan"]["chosen_by"] == "recorded"
PY
run "verify --out --json" "$vlrnn" verify --filter 'rnnx1/ce/sum/f64/h0=grad/T=28 vlrnn:block_length=7' \
  --out verify --json verify.json
mkdir bench
cp "$source_dir/results/cpu-gru-variants/bench_gru_variants.json" bench/
run "bench_meta.py" env META_COMMAND="scripts/bench_gru_variants.sh bench" \
  META_BENCHMARK_COMMAND="build/bench_gru_variants" META_BLAS=/usr/lib/libblas.so.3 \
  META_TORCH=1.13.0 META_LOAD_BEFORE="0.1 0.2 0.3" META_LOAD_AFTER="0.3 0.2 0.1" \
  META_JSON=bench_gru_variants.json META_CLOCK=real "$python" "$source_dir/scripts/bench_meta.py" \
  bench/meta.json
run "bench_to_records.py" "$python" "$source_dir/scripts/bench_to_records.py" bench
sets=(shard0 shard1 merged compare.json compare_plan.json compare_kinds.json sweep_plan budget train
      train_planner train_plan
      verify verify.json bench)
run "every set holds the results schema" "$python" "$source_dir/scripts/results_schema.py" "${sets[@]}"
cat last.log | tail -1

# One key per fact (schema 3): each fact under the name the schema gives it, and no other.
run "one key per fact in what the commands wrote" "$python" - <<'PY'
import json
def records(folder):
    return [json.loads(line) for line in open(folder + "/results.jsonl")]
grid = [r for r in records("merged") if r["kind"] == "grid"]
assert grid and all(r["H"] == 3 and "hidden" not in r for r in grid), grid[0]
budget = records("budget")
theory = [r for r in budget if r["kind"] == "theory"]
assert theory and all("time_s" in r["predicted"] for r in theory), theory[0]
assert all(r["problem"]["H"] == 4 for r in budget if "problem" in r)
steps = [r for r in records("train") if r["kind"] == "train_step"]
assert steps and all("time_s" in r and "clock_s" in r for r in steps), steps[0]
assert steps[-1]["clock_s"] >= sum(r["time_s"] for r in steps) * 0.99, steps
run = [r for r in records("train") if r["kind"] == "train_run"][0]
assert run["H"] > 0 and run["clock_s"] > 0 and "wall_s" not in run, run
verified = records("verify")
assert verified and all({"H", "max_abs", "max_rel", "worst"} <= set(r) for r in verified), \
    verified[0]
assert "time_s" in json.load(open("verify/meta.json"))["verify"]
compare = json.load(open("compare.json"))
assert compare["meta"]["problem"]["H"] == 4 and compare["meta"]["schema_version"] == 3
PY

# The checker is not a rubber stamp: an old key name, a missing fact, a clean claim about an
# unknown commit each fail it; so does each name a fact had before schema 3, where a writer
# put it.
"$python" - "$work" <<'PY' > /dev/null
import json, os, shutil, sys
work = sys.argv[1]
def variant(name, change, source="merged", record_change=None):
    shutil.copytree(os.path.join(work, source), os.path.join(work, name))
    path = os.path.join(work, name, "meta.json")
    meta = json.load(open(path))
    change(meta)
    json.dump(meta, open(path, "w"))
    if record_change:
        path = os.path.join(work, name, "results.jsonl")
        records = [json.loads(line) for line in open(path)]
        for record in records:
            record_change(record)
        open(path, "w").write("".join(json.dumps(r) + "\n" for r in records))
def rename(holder, old, new):
    if new in holder:
        holder[old] = holder.pop(new)
def rename_in(key, old, new):
    return lambda r: rename(r.get(key, {}), old, new)
variant("old-name", lambda m: m.update(command_line=m.pop("command")))
variant("no-load", lambda m: m.pop("load_average"))
variant("clean-unknown", lambda m: m.update(git_sha="unknown", git_dirty=False))
variant("old-version", lambda m: m.update(schema_version=1))
keep = lambda m: None
variant("old-hidden", keep, "merged", lambda r: rename(r, "hidden", "H"))
variant("old-hidden-in-problem", keep, "budget", rename_in("problem", "hidden", "H"))
variant("old-hidden_size", keep, "verify", lambda r: rename(r, "hidden_size", "H"))
variant("old-max_abs_diff", keep, "verify", lambda r: rename(r, "max_abs_diff", "max_abs"))
variant("old-max_rel_diff", keep, "verify", lambda r: rename(r, "max_rel_diff", "max_rel"))
variant("old-worst_tensor", keep, "verify", lambda r: rename(r, "worst_tensor", "worst"))
variant("old-seconds", keep, "budget", rename_in("predicted", "seconds", "time_s"))
variant("old-seconds-in-meta", lambda m: rename(m["verify"], "seconds", "time_s"), "verify")
variant("old-wall_s", keep, "train", lambda r: rename(r, "wall_s", "clock_s"))
PY
for bad in old-name no-load clean-unknown old-version old-hidden old-hidden-in-problem \
    old-hidden_size old-max_abs_diff old-max_rel_diff old-worst_tensor old-seconds \
    old-seconds-in-meta old-wall_s; do
  if "$python" "$source_dir/scripts/results_schema.py" "$bad" > "$work/bad.log" 2>&1; then
    echo "FAIL the schema check passed a set with $bad"
    failures=$((failures + 1))
  else
    echo "ok   the schema check fails a set with $bad: $(head -1 "$work/bad.log")"
  fi
done

echo "results schema: $failures failed"
((failures == 0))
