#include "runtime/current_runtime.h"

#include <exception>
#include <mutex>

namespace hvd::runtime::current_runtime {
namespace {

struct Holder {
  std::mutex lifecycle;  // held through a whole init or shutdown
  std::mutex pointer;    // guards runtime
  std::shared_ptr<Runtime> runtime;
};

Holder& holder() {
  static Holder h;
  return h;
}

}  // namespace

std::shared_ptr<Runtime> get() {
  Holder& h = holder();
  std::lock_guard<std::mutex> lock(h.pointer);
  return h.runtime;
}

void init(const std::function<Config()>& makeConfig) {
  Holder& h = holder();
  std::lock_guard<std::mutex> lifecycle(h.lifecycle);
  if (get()) return;
  std::shared_ptr<Runtime> created = Runtime::create(makeConfig());
  std::lock_guard<std::mutex> lock(h.pointer);
  h.runtime = std::move(created);
}

void shutdown() {
  Holder& h = holder();
  std::lock_guard<std::mutex> lifecycle(h.lifecycle);
  std::shared_ptr<Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(h.pointer);
    runtime = std::move(h.runtime);
  }
  if (!runtime) return;
  std::exception_ptr error;
  try {
    runtime->shutdown();
  } catch (...) {
    error = std::current_exception();
  }
  runtime.reset();
  if (error) std::rethrow_exception(error);
}

}  // namespace hvd::runtime::current_runtime
