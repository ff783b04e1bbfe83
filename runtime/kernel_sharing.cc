#include "runtime/kernel_sharing.h"

#include <fstream>

#include "common/error.h"

namespace hvd::runtime {

std::string kernelId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return "";
  return id;
}

int ranksOnKernel(rendezvous::Store& store, const std::string& prefix, const std::string& kernel,
                  int size, int localSize, std::chrono::milliseconds timeout) {
  std::string counter = prefix + "/kernel/" + kernel;
  if (!kernel.empty()) store.add(counter, 1);
  // The rank that counts last says so; every rank reads its kernel's count after that.
  std::string allCounted = prefix + "/kernels-counted";
  std::string ranksCounted = prefix + "/kernel-ranks-counted";
  if (store.add(ranksCounted, 1) == size) store.set(allCounted, rendezvous::Bytes{1});
  try {
    store.wait({allCounted}, timeout);
  } catch (const rendezvous::StoreTimeout& e) {
    throw rendezvous::StoreTimeout(
        detail::concat("init: ", store.add(ranksCounted, 0), " of ", size,
                       " ranks reached the count of ranks per machine within ",
                       std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                       " s (HVD_START_TIMEOUT); the others did not start or died: ", e.what()),
        {allCounted});
  }
  if (kernel.empty()) return localSize;
  return static_cast<int>(store.add(counter, 0));
}

}  // namespace hvd::runtime
