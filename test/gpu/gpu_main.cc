// The GPU tests' main: without a CUDA device they cannot run, so the program says so and exits
// with 77, which CTest reports as "skipped" (SKIP_RETURN_CODE), not as passed.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: the GPU tests were skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
