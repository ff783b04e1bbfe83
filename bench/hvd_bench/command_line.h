// hvd-bench's command line: one mode per run, each a function of its own (command_line.cc):
// the collective sweep by default, or --engine, --gpu, --startup (and --startup-first before a
// sweep), --simulate, --negotiation, --calibrate. docs/cli.md lists the flags.
#pragma once

namespace hvd::bench {

// Parses the command line and runs its mode. Returns the exit status: 0, 1 when a sweep's
// results were wrong or a mode failed, 2 for a bad command line (said on stderr).
int runCommandLine(int argc, char** argv);

}  // namespace hvd::bench
