#include "commands/command.h"

#include "lib/online_counts.h"

#include <iostream>
#include <memory>

namespace vlrnn::cli {
namespace {

struct OnlineCountsArgs {
  std::vector<int64_t> slots = experiments::kOnlineCountsSlots;
  std::vector<int64_t> steps = experiments::kOnlineCountsSteps;
  int64_t longest = experiments::kOnlineCountsLongest;
};

}  // namespace

void add_online_counts_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<OnlineCountsArgs>();
  auto* sub = add_subcommand(
      app, "online-counts",
      "Online checkpointing's recomputation beside offline revolve's, as a markdown table",
      "For each slot count s: the no-grad steps the online method recomputes (its states kept "
      "while the forward pass runs, never told T), offline revolve's minimum (told T) and the "
      "bound Wang, Moin and Iaccarino prove, t·(T − 1) with t revolve's repetition number; "
      "then, over every T up to --longest, where online equals revolve and whether the bound "
      "held. Counts only: nothing runs a model. docs/methods.md holds the default output.");
  sub->add_option("--slots", args->slots, "slot counts s (h0's included), comma-separated")
      ->delimiter(',');
  sub->add_option("--steps", args->steps, "sequence lengths T of the table, comma-separated")
      ->delimiter(',');
  sub->add_option("--longest", args->longest, "the summary tries every T from 1 to this");
  sub->callback([args, &exit_code] {
    std::cout << experiments::online_counts_markdown(args->steps, args->slots, args->longest);
    exit_code = 0;
  });
}

}  // namespace vlrnn::cli
