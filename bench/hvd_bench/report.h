// hvd-bench's output: the nccl-tests table on stdout and the same rows as JSON.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "bench/hvd_bench/collective_bench.h"

namespace hvd::bench {

void printTable(std::ostream& out, const BenchOptions& o, int ranks, const std::vector<Row>& rows);
// `settings`: the runtime settings that shape the result (transport, hierarchical
// collectives), recorded so that runs compared later say what they ran. Throws
// InvalidArgument if the file cannot be written.
void writeJson(const std::string& path, const BenchOptions& o, int ranks,
               const std::vector<Row>& rows, const std::map<std::string, std::string>& settings);
double averageBusBandwidth(const std::vector<Row>& rows);

}  // namespace hvd::bench
