// Gloo peer for bench/compare_peers.sh, started by hvdrun (rank and size from RANK and
// WORLD_SIZE, the torchrun names hvdrun sets beside HVD_RANK and HVD_SIZE) with a FileStore
// directory as the first argument:
//   hvdrun -np 2 ./gloo_allreduce /tmp/store -b 4 -e 256M ...
// Uses gloo::allreduce, the algorithm torch.distributed's gloo backend calls.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>

#include "sweep.h"

int main(int argc, char** argv) {
  int rank = std::atoi(std::getenv("RANK")), size = std::atoi(std::getenv("WORLD_SIZE"));
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[1]);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);
  auto sum = [](void* c, const void* a, const void* b, size_t n) {
    auto* out = static_cast<float*>(c);
    auto* x = static_cast<const float*>(a);
    auto* y = static_cast<const float*>(b);
    for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
  };
  auto barrier = [&] {
    gloo::BarrierOptions opts(context);
    gloo::barrier(opts);
  };
  peers::sweep(
      "gloo", rank, size, peers::parseArgs(argc - 1, argv + 1),
      [&](const float* in, float* out, std::size_t n) {
        gloo::AllreduceOptions opts(context);
        opts.setInput(const_cast<float*>(in), n);
        opts.setOutput(out, n);
        opts.setReduceFunction(sum);
        gloo::allreduce(opts);
      },
      barrier,
      [&](double x) {
        double result = 0;
        gloo::AllreduceOptions opts(context);
        opts.setInput(&x, 1);
        opts.setOutput(&result, 1);
        opts.setReduceFunction([](void* c, const void* a, const void* b, size_t n) {
          for (size_t i = 0; i < n; ++i)
            static_cast<double*>(c)[i] =
                static_cast<const double*>(a)[i] + static_cast<const double*>(b)[i];
        });
        gloo::allreduce(opts);
        return result / size;
      });
  return 0;
}
