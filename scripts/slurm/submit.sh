#!/usr/bin/env bash
# Submits a sweep as a Slurm job array of N shards plus a merge job that runs after it:
#
#   scripts/slurm/submit.sh CONFIG N [--out DIR] [--only LIST] [SBATCH OPTION...]
#
#   CONFIG      a sweep config (experiments/configs/*.json)
#   N           shards = array tasks 0..N-1 (`vlrnn sweep --shard I/N`), balanced by cost
#   --out DIR   where shard-I/, merged/ and logs/ go (default results/<config>-slurm)
#   --only LIST resubmit only these tasks (e.g. 1 or 0,2: what `vlrnn merge` says is owed);
#               they resume from their last recorded point, and the merge runs again
#   the rest    passed to both sbatch calls (e.g. --partition=gpu --account=abc)
#
# Environment: VLRNN_SLURM_GRES (e.g. gpu:1; default none), VLRNN_SLURM_CPUS (per task,
# default 2), VLRNN_SLURM_TIME (per task, default 24:00:00), VLRNN_SLURM_MERGE_TIME
# (default 00:30:00), VLRNN_BIN (default build/vlrnn of this checkout).
# Prints `array_job=ID` and `merge_job=ID` on stdout; what it did on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/scripts/slurm
usage="usage: scripts/slurm/submit.sh CONFIG N [--out DIR] [--only LIST] [SBATCH OPTION...]"

if (($# < 2)); then
  echo "submit.sh: expected CONFIG and N, got $# arguments" >&2
  echo "$usage" >&2
  exit 2
fi
config=$1 shards=$2
shift 2
if [[ ! -f $config ]]; then
  echo "submit.sh: CONFIG: expected a sweep config file, got '$config' (no such file)" >&2
  exit 2
fi
if ! [[ $shards =~ ^[1-9][0-9]*$ ]]; then
  echo "submit.sh: N: expected a positive integer (the number of shards), got '$shards'" >&2
  exit 2
fi
out=$root/results/$(basename "$config" .json)-slurm
array="0-$((shards - 1))"
extra=()
while (($#)); do
  case $1 in
    --out) out=${2:?"submit.sh: --out: expected a folder, got nothing"}; shift 2 ;;
    --only)
      array=${2:?"submit.sh: --only: expected task numbers like 1 or 0,2, got nothing"}
      for task in ${array//,/ }; do
        if ! [[ $task =~ ^[0-9]+$ ]] || ((task >= shards)); then
          echo "submit.sh: --only: expected task numbers in 0..$((shards - 1)), got '$task'" >&2
          exit 2
        fi
      done
      shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
config=$(realpath "$config")
out=$(realpath -m "$out")
mkdir -p "$out/logs"

common=(--parsable --chdir="$root" --export="ALL,VLRNN_ROOT=$root")
sweep=(--array="$array" --cpus-per-task="${VLRNN_SLURM_CPUS:-2}" --time="${VLRNN_SLURM_TIME:-24:00:00}"
       --output="$out/logs/shard-%a.%A.out")  # a resubmitted task keeps the old log
# The merge job asks for the same GRES: vlrnn checks a config's device when it reads it, so
# merging a CUDA sweep needs a node where CUDA is visible.
gres=()
if [[ -n ${VLRNN_SLURM_GRES:-} ]]; then gres=(--gres="$VLRNN_SLURM_GRES"); fi
array_job=$(sbatch "${common[@]}" "${sweep[@]}" "${gres[@]}" "${extra[@]}" "$here/sweep.sbatch" "$config" "$out" "$shards")
array_job=${array_job%%;*}  # --parsable prints ID or ID;CLUSTER
merge_job=$(sbatch "${common[@]}" "${gres[@]}" "${extra[@]}" --dependency="afterany:$array_job" --time="${VLRNN_SLURM_MERGE_TIME:-00:30:00}" \
                   --output="$out/logs/merge-%j.out" "$here/merge.sbatch" "$out" "$shards")
merge_job=${merge_job%%;*}
echo "submit.sh: array job $array_job (tasks $array of $shards) -> $out/shard-*/ (logs in $out/logs/)" >&2
echo "submit.sh: merge job $merge_job after it -> $out/merged/ (then: python3 scripts/plot.py $out/merged)" >&2
echo "array_job=$array_job"
echo "merge_job=$merge_job"
