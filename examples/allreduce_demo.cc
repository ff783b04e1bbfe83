// The smallest hvd program: every rank contributes (rank + 1) * [1, 2, 3, 4], allreduces with
// SUM through the C API, and prints what it got next to the closed-form expectation.
//   hvdrun -np 4 -H localhost:4 build/examples/allreduce_demo
#include <hvd/hvd.h>

#include <cmath>
#include <cstdio>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    hvd_status s = (call);                                                                        \
    if (s != HVD_SUCCESS) {                                                                       \
      std::fprintf(stderr, "%s failed: %s: %s\n", #call, hvd_status_string(s), hvd_last_error()); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

int main() {
  CHECK(hvd_init());
  int rank = 0, size = 0;
  CHECK(hvd_rank(&rank));
  CHECK(hvd_size(&size));
  float values[4];
  for (int i = 0; i < 4; ++i) values[i] = static_cast<float>((rank + 1) * (i + 1));
  CHECK(hvd_allreduce(values, values, 4, HVD_FLOAT32, HVD_SUM));
  float ranksSum = size * (size + 1) / 2.0f;
  bool ok = true;
  for (int i = 0; i < 4; ++i) ok &= std::fabs(values[i] - ranksSum * (i + 1)) < 1e-4f;
  std::printf("rank %d/%d: allreduce sum = [%g, %g, %g, %g] (expected %g * [1, 2, 3, 4]) %s\n",
              rank, size, values[0], values[1], values[2], values[3], ranksSum,
              ok ? "OK" : "WRONG");
  CHECK(hvd_barrier());
  CHECK(hvd_shutdown());
  return ok ? 0 : 1;
}
