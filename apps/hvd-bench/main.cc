// hvd-bench: nccl-tests-style sweep of one collective, run as a worker under hvdrun:
//   hvdrun -np 2 hvd-bench -b 4 -e 256M -f 4 -o allreduce -d float32 --json out.json
// Its other modes and flags: bench/hvd_bench/command_line.h, docs/cli.md.
#include "bench/hvd_bench/command_line.h"

int main(int argc, char** argv) { return hvd::bench::runCommandLine(argc, argv); }
