#include "launcher/check_build.h"

#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "collectives/gpu/gpu_build.h"
#include "collectives/transport/shm/shm_cleanup.h"
#include "common/error.h"
#include "common/params.h"
#include "launcher/local_spawner.h"

namespace hvd::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Run by the workers' Python: imports hvd (that is the check) but only looks up the frameworks'
// installed versions, since importing torch alone takes seconds.
constexpr const char* kProbe = R"PY(
import json, sys
from importlib import metadata
out = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import hvd
    from hvd import _core
    out["hvd"] = {"version": hvd.__version__, "path": hvd.__path__[0],
                  "build": _core.build_info()}
except BaseException as e:
    out["hvd_error"] = "%s: %s" % (type(e).__name__, e)
for name in ("torch", "numpy", "horovod", "keras"):
    try:
        out[name] = metadata.version(name)
    except Exception:
        out[name] = None
out["tensorflow"] = None
for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-intel"):
    try:
        out["tensorflow"] = metadata.version(dist)
        break
    except Exception:
        pass
# TensorFlow is imported (a few seconds): hvd.tensorflow is pure Python over its DLPack and
# graph APIs, so whether it imports against this TensorFlow is the question.
out["hvd_tensorflow_error"] = None
if out["tensorflow"] and "hvd" in out:
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import hvd.tensorflow
    except BaseException as e:
        out["hvd_tensorflow_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
)PY";

struct ProbeResult {
  std::string out, err;
  int status = -1;      // exit status, -1 when it did not exit by itself
  std::string problem;  // why it could not run to the end
};

ProbeResult runProbe(const CheckBuildOptions& o) {
  ProbeResult r;
  std::string executable;
  try {
    executable = resolveExecutable(o.python, o.env);
  } catch (const InvalidArgument& e) {
    r.problem = e.what();
    return r;
  }
  LocalWorker w = spawnLocal(executable, {o.python, "-c", kProbe}, o.env);
  auto deadline = Clock::now() + o.pythonTimeout;
  pollfd fds[2] = {{w.stdoutFd, POLLIN, 0}, {w.stderrFd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0 && Clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(fds, 2, static_cast<int>(std::max<int64_t>(left.count(), 1))) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(w.pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    ::usleep(10000);
  if (done == 0) {
    ::kill(-w.pid, SIGKILL);  // its own process group (local_spawner.h)
    ::waitpid(w.pid, &status, 0);
    r.problem = detail::concat(o.python, " did not finish within ", o.pythonTimeout.count(), " s");
    return r;
  }
  if (WIFEXITED(status))
    r.status = WEXITSTATUS(status);
  else
    r.problem = detail::concat(o.python, " was killed by signal ", WTERMSIG(status));
  return r;
}

std::string mark(bool ok) { return ok ? "    [X] " : "    [ ] "; }

std::string lastLine(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

// Room in /dev/shm for the shared-memory transport, with the ring size the workers would use.
// Too little is not fatal (ranks fall back to TCP, or fail with HVD_TRANSPORT=shm), so it is
// reported, not failed.
void describeShm(std::ostringstream& out, const Environment& env) {
  auto ringBytes = static_cast<std::size_t>(
      params::ParamValues::fromMap(env).getInt(params::ParamId::ShmBufferBytes));
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) {
    out << mark(false) << "/dev/shm: " << std::strerror(errno)
        << " (ranks of one host will use TCP)\n";
    return;
  }
  std::size_t freeBytes = static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize;
  std::size_t need = collectives::shm::jobBytesOnHost(8, ringBytes);
  out << mark(freeBytes >= need) << "/dev/shm: " << (freeBytes >> 20)
      << " MiB free; 8 ranks on one host need room for " << ((need + (1 << 20) - 1) >> 20)
      << " MiB with HVD_SHM_BUFFER_BYTES=" << ringBytes
      << (freeBytes >= need
              ? ""
              : " (a job of 8 ranks here would fall back to TCP, or fail with HVD_TRANSPORT=shm)")
      << "\n";
}

void describeBuild(std::ostringstream& out, const collectives::gpu::GpuBuild& b,
                   const Environment& env) {
  out << "\nBuilt with:\n"
      << mark(true) << "TCP transport (host memory tensors)\n"
      << mark(true) << "shared-memory transport (host memory tensors, ranks of one host)\n";
  if (!b.cuda)
    out << mark(false) << "CUDA (built without the CUDA toolkit: GPU tensors are refused)\n"
        << mark(false) << "NCCL\n";
  else
    out << mark(true) << "CUDA " << b.cudaToolkit << "\n" << mark(true) << b.ncclVersion << "\n";
  out << "\nFound on this machine:\n";
  describeShm(out, env);
  if (!b.cuda) return;
  out << mark(!b.cudaDriver.empty()) << "CUDA driver"
      << (b.cudaDriver.empty() ? " (none: GPU tensors cannot be used here)"
                               : " supporting CUDA " + b.cudaDriver)
      << "\n";
  if (b.devices.empty()) out << mark(false) << "CUDA devices: " << b.deviceProblem << "\n";
  for (const auto& d : b.devices) out << mark(true) << d << "\n";
  if (b.ncclProblem.empty())
    out << mark(true) << "NCCL library " << b.ncclLibrary << "\n";
  else
    out << mark(false) << "NCCL library: " << b.ncclProblem << "\n";
}

// TensorFlow and Keras: their versions, and whether hvd.tensorflow imports against them.
void describeTensorFlow(std::ostringstream& out, const json& facts) {
  const json& tf = facts.at("tensorflow");
  if (!tf.is_string()) {
    out << mark(false) << "TensorFlow (hvd.tensorflow): not installed\n";
  } else if (facts.at("hvd_tensorflow_error").is_string()) {
    out << mark(false) << "TensorFlow " << tf.get<std::string>()
        << ": hvd.tensorflow cannot be imported: "
        << facts.at("hvd_tensorflow_error").get<std::string>() << "\n";
  } else {
    out << mark(true) << "TensorFlow (hvd.tensorflow) " << tf.get<std::string>() << "\n";
  }
  const json& keras = facts.at("keras");
  out << mark(keras.is_string() && tf.is_string()) << "Keras (hvd.tensorflow.keras)"
      << (keras.is_string() ? " " + keras.get<std::string>() : std::string(": not installed"))
      << "\n";
}

// What the probe reported; json::exception when the report lacks a field.
// `hvdrunCuda`: whether hvdrun's own build has CUDA, to catch a package from another build.
bool describeFacts(std::ostringstream& out, const CheckBuildOptions& o, bool hvdrunCuda,
                   const json& facts) {
  out << "\nPython (" << o.python << " = " << facts.at("executable").get<std::string>() << ", "
      << facts.at("python").get<std::string>() << "):\n";
  bool usable = facts.contains("hvd");
  if (usable) {
    const json& h = facts.at("hvd");
    bool cuda = h.at("build").at("cuda").get<bool>();
    out << mark(true) << "hvd " << h.at("version").get<std::string>() << " from "
        << h.at("path").get<std::string>()
        << (cuda ? " (built with CUDA and NCCL)" : " (built without GPU support)") << "\n";
    if (cuda != hvdrunCuda)
      out << "        warning: this package and hvdrun come from different builds (one has "
             "CUDA, the other not)\n";
  } else {
    out << mark(false) << "hvd cannot be imported: " << facts.at("hvd_error").get<std::string>()
        << "\n        (run scripts/build.sh, or pip install . from the repository)\n";
  }
  const std::pair<const char*, const char*> frameworks[] = {{"torch", "PyTorch (hvd.torch)"},
                                                            {"numpy", "NumPy (hvd.numpy)"}};
  for (const auto& [key, label] : frameworks) {
    bool found = facts.at(key).is_string();
    out << mark(found) << label
        << (found ? " " + facts.at(key).get<std::string>() : std::string(": not installed"))
        << "\n";
  }
  describeTensorFlow(out, facts);
  if (facts.at("horovod").is_string())
    out << "        note: Horovod " << facts.at("horovod").get<std::string>()
        << " is installed; `import horovod` uses it unless hvdrun runs with --horovod-compat\n";
  return usable;
}

bool describePython(std::ostringstream& out, const CheckBuildOptions& o, bool hvdrunCuda) {
  ProbeResult r = runProbe(o);
  if (r.problem.empty() && r.status != 0)
    r.problem = detail::concat(o.python, " exited with status ", r.status, ": ", lastLine(r.err));
  if (r.problem.empty()) {
    try {
      return describeFacts(out, o, hvdrunCuda, json::parse(lastLine(r.out)));
    } catch (const json::exception& e) {
      r.problem = detail::concat(o.python, "'s report could not be read (", e.what(),
                                 "): ", lastLine(r.out + r.err));
    }
  }
  out << "\nPython (" << o.python << "):\n" << mark(false) << r.problem << "\n";
  return false;
}

}  // namespace

CheckBuildReport checkBuild(const CheckBuildOptions& options) {
  std::ostringstream out;
  out << "hvd " << options.version << "\n";
  auto gpu = collectives::gpu::gpuBuild(true);
  describeBuild(out, gpu, options.env);
  CheckBuildReport report;
  report.pythonUsable = describePython(out, options, gpu.cuda);
  report.text = out.str();
  return report;
}

}  // namespace hvd::launcher
