#pragma once
// Each `vlrnn` subcommand lives in its own file and registers itself on the app here.
// A subcommand's callback stores its exit code in `exit_code`; errors are thrown and the
// main catches them, prints a hint and exits non-zero.

#include "vlrnn/registry/models.h"

#include <CLI/CLI.hpp>

#include <string>

namespace vlrnn::cli {

// The command line as typed (set by main before parsing), for records such as meta.json.
inline std::string& command_line() {
  static std::string line;
  return line;
}

// A subcommand that `vlrnn --help` lists with the one line `summary`; `details` shows at the
// end of its own --help.
inline CLI::App* add_subcommand(CLI::App& app, const std::string& name, const std::string& summary,
                                const std::string& details) {
  auto* sub = app.add_subcommand(name, summary);
  sub->footer(details);
  return sub;
}

// "recurrent model: rnn, gru, ...": the help of a --model option, from the model registry,
// so that a kind added to builtin_models() shows up without editing any help.
inline std::string model_option_help() {
  std::string help = "recurrent model:";
  for (const auto& kind : model_kinds()) help += (help.back() == ':' ? " " : ", ") + kind;
  return help + ", bi:<kind> (any of them, bidirectional)";
}

// The one --device flag of every command that runs a model: the text is parsed by
// experiments::parse_device(), which names the flag when a build or machine cannot run it.
inline CLI::Option* add_device_option(CLI::App* sub, std::string& device, const std::string& what) {
  return sub->add_option("--device", device,
                         what + ": cpu, or cuda / cuda:N (a CUDA build, on a machine with a GPU)");
}

void add_verify_command(CLI::App& app, int& exit_code);
void add_methods_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_sweep_command(CLI::App& app, int& exit_code);
void add_budget_command(CLI::App& app, int& exit_code);
void add_merge_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_online_counts_command(CLI::App& app, int& exit_code);

}  // namespace vlrnn::cli
