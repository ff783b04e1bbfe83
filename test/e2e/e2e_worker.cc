// A worker for the end-to-end tests, started by hvdrun. Modes:
//   env                 print the placement variables the launcher set
//   allreduce COUNT     allreduce float32 and int64 vectors, check, print "rank R ok"
//   broadcast ROOT      broadcast from ROOT, check, print "rank R ok"
//   loop                allreduce until stopped (prints "rank R looping" once)
//   die SIGNAL          allreduce 64 MiB until one fails; rank 1 raises SIGNAL on itself
//                       after 1 s, in the middle of a transfer; the others print "rank R
//                       failed after S s: ERROR" when their allreduce fails
//   reinit ROUNDS       allreduce, shut down and initialise again, ROUNDS times
//   affinity            start a thread, initialise, allreduce, then print "rank R cpus LIST"
//                       with each distinct CPU list of the process's threads (/proc/self/task)
#include <hvd/hvd.h>

#include <dirent.h>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

int fail(const char* what, hvd_status s) {
  std::fprintf(stderr, "%s failed: %s: %s\n", what, hvd_status_string(s), hvd_last_error());
  return 1;
}

#define CALL(x)                                 \
  do {                                          \
    hvd_status s_ = (x);                        \
    if (s_ != HVD_SUCCESS) return fail(#x, s_); \
  } while (0)

int printEnv() {
  const char* names[] = {"HVD_RANK",
                         "HVD_SIZE",
                         "HVD_LOCAL_RANK",
                         "HVD_LOCAL_SIZE",
                         "HVD_CROSS_RANK",
                         "HVD_CROSS_SIZE",
                         "HVD_HOSTNAME",
                         "HOROVOD_RANK",
                         "RANK",
                         "WORLD_SIZE",
                         "LOCAL_RANK",
                         "LOCAL_WORLD_SIZE",
                         "HVD_FUSION_THRESHOLD",
                         "HVD_CYCLE_TIME",
                         "HVD_CACHE_CAPACITY",
                         "HVD_TIMELINE",
                         "HVD_STALL_CHECK_DISABLE",
                         "HVD_LOG_LEVEL",
                         "HVD_HIERARCHICAL_ALLREDUCE",
                         "HVD_HIERARCHICAL_ALLGATHER"};
  std::string line;
  for (const char* n : names)
    line += std::string(n) + "=" + (std::getenv(n) ? std::getenv(n) : "") + " ";
  std::printf("%s\n", line.c_str());
  return 0;
}

int allreduce(std::size_t count) {
  int rank, size;
  CALL(hvd_rank(&rank));
  CALL(hvd_size(&size));
  std::vector<float> f(count);
  std::vector<int64_t> i64(count);
  for (std::size_t i = 0; i < count; ++i) {
    f[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
    i64[i] = static_cast<int64_t>(rank + 1) << 33;
  }
  CALL(hvd_allreduce(f.data(), f.data(), count, HVD_FLOAT32, HVD_SUM));
  CALL(hvd_allreduce(i64.data(), i64.data(), count, HVD_INT64, HVD_SUM));
  for (std::size_t i = 0; i < count; ++i) {
    float want = size * (size + 1) / 2.0f * (i % 5 + 1);
    if (std::fabs(f[i] - want) > 1e-3f * want) {
      std::fprintf(stderr, "rank %d: float32 element %zu is %g, want %g\n", rank, i, f[i], want);
      return 1;
    }
    if (i64[i] != (static_cast<int64_t>(size) * (size + 1) / 2) << 33) {
      std::fprintf(stderr, "rank %d: int64 element %zu wrong\n", rank, i);
      return 1;
    }
  }
  std::printf("rank %d ok\n", rank);
  return 0;
}

int broadcast(int root) {
  int rank;
  CALL(hvd_rank(&rank));
  std::vector<int32_t> v(1000, rank == root ? 7 : -1);
  CALL(hvd_broadcast(v.data(), v.size(), HVD_INT32, root));
  for (int32_t x : v)
    if (x != 7) {
      std::fprintf(stderr, "rank %d: broadcast gave %d\n", rank, x);
      return 1;
    }
  std::printf("rank %d ok\n", rank);
  return 0;
}

int loop() {
  int rank;
  CALL(hvd_rank(&rank));
  std::vector<float> v(4096, 1.0f);
  for (long i = 0;; ++i) {
    CALL(hvd_allreduce(v.data(), v.data(), v.size(), HVD_FLOAT32, HVD_AVERAGE));
    if (i == 10) {
      std::printf("rank %d looping\n", rank);
      std::fflush(stdout);
    }
  }
}

int dieInAllreduce(int signal) {
  int rank;
  CALL(hvd_rank(&rank));
  if (rank == 1)
    std::thread([signal] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::raise(signal);
    }).detach();
  std::vector<float> v(16u << 20, 1.0f);
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    hvd_status s = hvd_allreduce(v.data(), v.data(), v.size(), HVD_FLOAT32, HVD_SUM);
    if (s != HVD_SUCCESS) {
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      std::printf("rank %d failed after %.1f s: %s\n", rank, took.count(), hvd_last_error());
      std::fflush(stdout);
      return 3;
    }
  }
}

// The Cpus_allowed_list of every thread of this process, deduplicated.
std::set<std::string> threadCpuLists() {
  std::set<std::string> lists;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return lists;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Cpus_allowed_list:", 0) == 0)
        lists.insert(line.substr(line.find_first_not_of(" \t", 18)));
  }
  closedir(dir);
  return lists;
}

// A thread started before hvd_init (as a framework's pool would be) must be bound as well.
int affinity() {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::thread early([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return stop; });
  });
  hvd_status s = hvd_init();
  int rc = s == HVD_SUCCESS ? allreduce(64) : fail("hvd_init()", s);
  if (rc == 0) {
    int rank;
    CALL(hvd_rank(&rank));
    std::string line = "rank " + std::to_string(rank) + " cpus";
    for (const auto& list : threadCpuLists()) line += " " + list;
    std::printf("%s\n", line.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(m);
    stop = true;
  }
  cv.notify_all();
  early.join();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "env") return printEnv();
  if (mode == "affinity") {
    int rc = affinity();
    if (rc == 0) CALL(hvd_barrier());
    CALL(hvd_shutdown());
    return rc;
  }
  CALL(hvd_init());
  int rc = 2;
  if (mode == "allreduce" && argc > 2)
    rc = allreduce(std::strtoul(argv[2], nullptr, 10));
  else if (mode == "broadcast" && argc > 2)
    rc = broadcast(std::atoi(argv[2]));
  else if (mode == "loop")
    rc = loop();
  else if (mode == "die" && argc > 2)
    rc = dieInAllreduce(std::atoi(argv[2]));
  else if (mode == "reinit" && argc > 2) {
    for (int round = 0, rounds = std::atoi(argv[2]); round < rounds && rc != 1; ++round) {
      rc = allreduce(1000);
      CALL(hvd_shutdown());
      CALL(hvd_init());
    }
  } else
    std::fprintf(stderr,
                 "usage: e2e_worker env | allreduce COUNT | broadcast ROOT | loop | "
                 "reinit ROUNDS | affinity\n");
  if (rc == 0) CALL(hvd_barrier());
  CALL(hvd_shutdown());
  return rc;
}
