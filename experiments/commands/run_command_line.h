#pragma once
// The whole `vlrnn` command line, as a function: the tool's main is only a call of it, and
// the tests run it in their own process (tests/experiments/commands/), where starting the
// tool once per case would cost a second each in loading LibTorch.

namespace vlrnn::cli {

// Parses `argv` (argv[0] the program's name), runs the subcommand it names and returns the
// exit code. A bad input of any kind (a flag, a value, a file, an output) prints one
// "vlrnn: error: ..." line and a hint on stderr and returns 2; --help prints to stdout and
// returns 0. Never throws.
int run_command_line(int argc, char** argv);

}  // namespace vlrnn::cli
