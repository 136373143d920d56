#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz/README.md): builds them (scripts/build_fuzzers.sh),
# replays each target's regression inputs (tests/fuzz/regressions/TARGET/), then fuzzes it
# for --seconds from its committed seeds (tests/fuzz/corpus/TARGET/). Exit 1 and the input
# that failed when a target crashes, hangs, runs out of memory or a sanitizer reports.
#
#   scripts/fuzz.sh                          # every target, 15 s each (ctest's fuzz.smoke: 4 s)
#   scripts/fuzz.sh --seconds 1800 --corpus /tmp/corpus method_spec   # a long run, kept
#
# --corpus DIR keeps what a run adds in DIR/TARGET (and starts from it next time); without
# it the run works in a temporary folder. The committed seeds are only read. --timeout S:
# one input running longer is a hang (default 10; more for a long run under `nice` on a
# busy machine, where a slow input may wait for the CPU).
# VLRNN_SKIP_FUZZ=1 skips it, exit 77 (scripts/test_debian13.sh: the parsers are the same
# code on both releases and link nothing of LibTorch but c10).
set -euo pipefail
if [[ ${VLRNN_SKIP_FUZZ:-0} == 1 ]]; then
  echo "fuzz.sh: skipped (VLRNN_SKIP_FUZZ=1)"
  exit 77
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=15
timeout=10
corpus=""
build=1
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --corpus) corpus="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^[^#]/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "vlrnn: error: fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((build)); then "$root/scripts/build_fuzzers.sh" >/dev/null; fi
bin="$root/build-fuzz/fuzz"
if ((${#targets[@]} == 0)); then
  for t in "$root"/tests/fuzz/corpus/*/; do
    t="$(basename "$t")"
    if [[ -x "$bin/fuzz_$t" ]]; then
      targets+=("$t")
    else  # the config loaders' targets need build/ (scripts/build_fuzzers.sh says so)
      echo "fuzz_$t: not built, skipped"
    fi
  done
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
  exe="$bin/fuzz_$t"
  if [[ ! -x "$exe" ]]; then
    echo "vlrnn: error: fuzz.sh: no target \"$t\" ($exe); targets: $(cd "$root/tests/fuzz/corpus" && echo *)" >&2
    exit 2
  fi
  # -rss_limit_mb: over 2 GiB is out of memory.
  limits=(-timeout="$timeout" -rss_limit_mb=2048)
  regressions=("$root/tests/fuzz/regressions/$t"/*)
  if [[ -e "${regressions[0]}" ]]; then
    if ! "$exe" "${limits[@]}" "${regressions[@]}" >"$scratch/$t.replay.log" 2>&1; then
      echo "fuzz_$t: a regression input fails again:"; tail -40 "$scratch/$t.replay.log"
      failed=1
      continue
    fi
  fi
  work="$scratch/$t.corpus"
  if [[ -n "$corpus" ]]; then work="$corpus/$t"; fi
  mkdir -p "$work" "$scratch/$t.artifacts"
  log="$scratch/$t.log"
  if [[ -n "$corpus" ]]; then log="$corpus/$t.log"; fi
  if "$exe" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$scratch/$t.artifacts/" "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1; then
    # The last status line: coverage (cov: edges, ft: features), corpus units/bytes, exec/s.
    echo "fuzz_$t: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1) $(grep -E 'number_of_executed_units' "$log" | awk '{print "runs: " $2}')"
  else
    echo "fuzz_$t: FAILED; the input that failed (keep it in tests/fuzz/regressions/$t/ once fixed):"
    for a in "$scratch/$t.artifacts"/*; do
      [[ -e "$a" ]] || continue
      if [[ -n "$corpus" ]]; then cp "$a" "$corpus/"; fi
      echo "  $(basename "$a"): $(head -c 300 "$a" | od -An -c | tr -s ' ' | head -5 | tr '\n' ' ')"
    done
    grep -E 'ERROR|SUMMARY|terminate|what\(\)|runtime error' "$log" | head -10
    failed=1
  fi
done
exit "$failed"
