#include "commands/command.h"

#include "vlrnn/registry/methods.h"

#include <fmt/format.h>

#include <iostream>

namespace vlrnn::cli {

void add_methods_command(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("methods", "List the gradient methods and their options.");
  sub->callback([&exit_code] {
    for (const auto& entry : method_registry()) {
      std::cout << fmt::format("  {:<12} {}\n", entry.name, entry.summary);
    }
    exit_code = 0;
  });
}

}  // namespace vlrnn::cli
