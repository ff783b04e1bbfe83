// The timing loop shared by the peer benchmarks (MPI, Gloo), identical to hvd-bench's method:
// for each size, warm up, barrier, time `iterations` out-of-place float32 sum allreduces,
// average the time across ranks; rank 0 prints one JSON object per line.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace peers {

struct SweepArgs {
  std::size_t minBytes = 4, maxBytes = 256u << 20;
  double factor = 4;
  int warmup = 5, iterations = 20;
  // --startup-first: before the sweep, every rank passes a barrier and prints
  // 'HVD_INITIALISED <unix time ns>', as `hvd-bench --startup-first` does.
  bool startupFirst = false;
};

inline SweepArgs parseArgs(int argc, char** argv) {
  SweepArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--startup-first") {
      a.startupFirst = true;
      continue;
    }
    if (i + 1 == argc) break;
    double v = std::atof(argv[++i]);
    if (flag == "-b") a.minBytes = static_cast<std::size_t>(v);
    if (flag == "-e") a.maxBytes = static_cast<std::size_t>(v);
    if (flag == "-f") a.factor = v;
    if (flag == "-w") a.warmup = static_cast<int>(v);
    if (flag == "-n") a.iterations = static_cast<int>(v);
  }
  return a;
}

// allreduce(in, out, count) sums float32; barrier() synchronises; averageAcrossRanks(x)
// returns the mean of x over all ranks.
inline void sweep(const char* tool, int rank, int size, const SweepArgs& a,
                  const std::function<void(const float*, float*, std::size_t)>& allreduce,
                  const std::function<void()>& barrier,
                  const std::function<double(double)>& averageAcrossRanks) {
  if (a.startupFirst) {
    barrier();
    long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    std::printf("HVD_INITIALISED %lld\n", ns);
    std::fflush(stdout);
  }
  for (std::size_t bytes = a.minBytes; bytes <= a.maxBytes;
       bytes = static_cast<std::size_t>(bytes * a.factor)) {
    std::size_t count = bytes / sizeof(float);
    std::vector<float> in(count, 1.0f + rank), out(count);
    for (int i = 0; i < a.warmup; ++i) allreduce(in.data(), out.data(), count);
    barrier();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iterations; ++i) allreduce(in.data(), out.data(), count);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() /
                a.iterations;
    us = averageAcrossRanks(us);
    long wrong = 0;
    for (float x : out) wrong += x != size * (size + 1) / 2.0f;
    if (rank == 0) {
      double algbw = bytes / (us * 1e-6) / 1e9;
      std::printf(
          "{\"tool\": \"%s\", \"ranks\": %d, \"size\": %zu, \"time_us\": %.3f, "
          "\"busbw_gbps\": %.4f, \"wrong\": %ld}\n",
          tool, size, bytes, us, algbw * 2.0 * (size - 1) / size, wrong);
      std::fflush(stdout);
    }
  }
}

}  // namespace peers
