#pragma once
// The options every measuring subcommand shares (compare, sweep, budget): the thread policy
// (NOTE [ Thread policy ] in vlrnn/measure/threads.h) and the provenance rule, results are
// written from a clean build only (NOTE [ Provenance from the build ] in lib/source_stamp.h).

#include "lib/source_stamp.h"

#include "vlrnn/measure/threads.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <iostream>
#include <string>

namespace vlrnn::cli {

struct MeasuringArgs {
  int threads = 1;       // LibTorch intra-op threads
  int blas_threads = 0;  // 0: every core
  bool allow_dirty = false;
  double until_stable = 0.0;  // see RunOptions::stable_within; 0: off
  int64_t max_repeats = 50;
};

inline void add_measuring_options(CLI::App* sub, MeasuringArgs& args) {
  sub->add_option("--threads", args.threads,
                  "LibTorch intra-op threads (default 1: the BLAS gets the cores; see "
                  "--blas-threads)")
      ->capture_default_str();
  sub->add_option("--blas-threads", args.blas_threads,
                  "threads of the BLAS (OpenBLAS) for the GEMMs (0: every core on PyTorch 1.x; "
                  "on 2.x the cores LibTorch's threads leave, cores / --threads, at least 1, "
                  "where two pools as wide as the machine fight over it)")
      ->capture_default_str();
  sub->add_flag("--allow-dirty", args.allow_dirty,
                "write results even from a binary built from uncommitted changes, or from an "
                "unknown tree (recorded in meta.json as git_dirty: true or \"unknown\")");
}

// --until-stable / --max-repeats, for commands that time methods against full BPTT.
inline void add_stability_options(CLI::App* sub, MeasuringArgs& args) {
  sub->add_option("--until-stable", args.until_stable,
                  "after --repeats, keep adding rounds until every time ratio to full has a 95% "
                  "interval within +-this fraction of its median (e.g. 0.05), or --max-repeats")
      ->capture_default_str();
  sub->add_option("--max-repeats", args.max_repeats, "cap on the timed rounds of --until-stable")
      ->capture_default_str();
}

// Checks the stability options against --repeats and hands them to the runner's options.
template <typename RunOptions>
void apply_stability(const MeasuringArgs& args, int64_t repeats, RunOptions& options) {
  TORCH_CHECK(args.until_stable >= 0 && args.until_stable < 1, "--until-stable: expected a "
              "fraction in [0, 1) (0: off), got ", args.until_stable);
  TORCH_CHECK(args.until_stable == 0 || args.max_repeats >= repeats, "--max-repeats: expected "
              ">= --repeats (", repeats, "), got ", args.max_repeats);
  options.stable_within = args.until_stable;
  options.max_repeats = args.max_repeats;
}

inline measure::ThreadSettings apply_threads(const MeasuringArgs& args) {
  TORCH_CHECK(args.threads >= 1, "--threads: expected >= 1 LibTorch intra-op threads, got ",
              args.threads);
  TORCH_CHECK(args.blas_threads >= 0, "--blas-threads: expected >= 1 BLAS threads, or 0 for "
              "the cores --threads leaves, got ", args.blas_threads);
  const auto settings = measure::apply_thread_policy(args.threads, args.blas_threads);
  const auto contend = measure::thread_pools_warning();
  if (!contend.empty()) std::cerr << "vlrnn: WARNING: " << contend << "\n";
  return settings;
}

// Results are written from a binary built from a clean, known tree only, unless --allow-dirty
// says the run is on purpose (NOTE [ Provenance from the build ]).
inline void check_clean_tree(const MeasuringArgs& args, const std::string& what) {
  experiments::check_results_provenance(experiments::built_from(), args.allow_dirty, what);
}

}  // namespace vlrnn::cli
