// hvd-bench's command line: the collective sweep by default, or one subcommand (a table in
// command_line.cc): engine, gpu, startup, calibrate, simulate N, negotiation. --startup-first
// comes before a sweep, gpu or engine. docs/cli.md lists the options.
#pragma once

namespace hvd::bench {

// Parses the command line and runs its mode. Returns the exit status: 0, 1 when a sweep's
// results were wrong or a mode failed, 2 for a bad command line (said on stderr).
int runCommandLine(int argc, char** argv);

}  // namespace hvd::bench
