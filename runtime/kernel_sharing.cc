#include "runtime/kernel_sharing.h"

#include <fstream>

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
  if (store.add(prefix + "/kernel-ranks-counted", 1) == size)
    store.set(allCounted, rendezvous::Bytes{1});
  store.wait({allCounted}, timeout);
  if (kernel.empty()) return localSize;
  return static_cast<int>(store.add(counter, 0));
}

}  // namespace hvd::runtime
