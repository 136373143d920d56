#include "commands/run_command_line.h"

#include "commands/command.h"
#include "lib/user_models.h"
#include "vlrnn/core/exact_float32.h"

#include <c10/util/Exception.h>

#include <iostream>

namespace vlrnn::cli {

namespace {

// The one error style of the command line: the message, a hint naming the subcommand's
// --help, exit code 2.
int report_error(const CLI::App& app, const std::string& message) {
  const auto subcommands = app.get_subcommands();
  std::cerr << "vlrnn: error: " << message << "\n"
            << "hint: run 'vlrnn " << (subcommands.empty() ? "" : subcommands.front()->get_name() + " ")
            << "--help' for usage\n";
  return 2;
}

}  // namespace

int run_command_line(int argc, char** argv) {
  // Every command runs float32 as float32 on a GPU (NOTE [ Float32 without TF32 ]).
  const ExactFloat32 exact_float32;
  CLI::App app{
      "vlrnn: exact backpropagation through time in blocks, for very long sequences.\n"
      "Full BPTT keeps every activation of every step (memory grows with T x B); VLRNN\n"
      "recomputes each block from a stored state and gets the same gradients."};
  app.require_subcommand(1);
  int exit_code = 0;
  add_verify_command(app, exit_code);
  add_methods_command(app, exit_code);
  add_compare_command(app, exit_code);
  add_sweep_command(app, exit_code);
  add_budget_command(app, exit_code);
  add_merge_command(app, exit_code);
  add_train_command(app, exit_code);
  add_online_counts_command(app, exit_code);
  // NOTE [ Plugins ] (vlrnn/registry/plugins.h): every subcommand takes --plugin, loaded
  // before the command's own callback runs, so its models and methods are known by name there.
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    sub->add_option_function<std::vector<std::string>>(
        "--plugin",
        [](const std::vector<std::string>& paths) {
          for (const auto& path : paths) load_plugin(path);
        },
        "PATH.so: a shared library whose extern \"C\" vlrnn_register_plugin() adds models "
        "or methods (repeatable; also VLRNN_PLUGINS=PATH[:PATH...])");
  }
  command_line().clear();  // a process that runs several command lines records each alone
  for (int i = 0; i < argc; ++i) command_line() += (i ? " " : "") + std::string(argv[i]);
  try {
    load_plugins_from_env();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are ParseErrors that succeed: CLI11 prints them. Every other
    // parse error (a bad value, a missing file, an unknown flag) is reported like any
    // other error: one "vlrnn: error:" line, a hint, exit 2.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return report_error(app, e.what());
  } catch (const c10::Error& e) {
    return report_error(app, e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::cerr << "vlrnn: error: " << e.what() << "\n";
    return 2;
  }
  return exit_code;
}

}  // namespace vlrnn::cli
