// `vlrnn`: verify, measure and compare exact memory-efficient BPTT methods.
#include "commands/run_command_line.h"

int main(int argc, char** argv) { return vlrnn::cli::run_command_line(argc, argv); }
