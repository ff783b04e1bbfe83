#include "launcher/python_path.h"

#include <filesystem>

#include "common/error.h"

namespace hvd::launcher {

namespace fs = std::filesystem;

namespace {

bool hasPackage(const fs::path& dir, const char* package) {
  std::error_code ec;
  return fs::is_regular_file(dir / package / "__init__.py", ec);
}

}  // namespace

PythonPackageDirs findPythonPackage(const std::string& hvdrunPath) {
  PythonPackageDirs dirs;
  std::error_code ec;
  fs::path exe = fs::weakly_canonical(hvdrunPath, ec);
  if (ec) return dirs;
  fs::path prefix = exe.parent_path().parent_path();
  if (hasPackage(prefix / "python", "hvd")) {
    dirs.package = (prefix / "python").string();
    if (hasPackage(prefix / "python" / "hvd" / "compat", "horovod"))
      dirs.compat = (prefix / "python" / "hvd" / "compat").string();
    return dirs;
  }
  // pip install: <prefix>/bin/hvdrun and <prefix>/lib/pythonX.Y/site-packages/hvd
  for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
    fs::path site = entry.path() / "site-packages";
    if (entry.path().filename().string().rfind("python", 0) == 0 && hasPackage(site, "hvd") &&
        hasPackage(site / "hvd" / "compat", "horovod")) {
      dirs.compat = (site / "hvd" / "compat").string();
      break;
    }
  }
  return dirs;
}

void addPythonPath(Environment& env, const PythonPackageDirs& dirs, bool horovodCompat) {
  std::string front;
  if (horovodCompat) {
    if (!dirs.compat)
      throw InvalidArgument(
          "--horovod-compat (HVD_HOROVOD_COMPAT=1): hvd's horovod compatibility package was not "
          "found next to hvdrun (expected ../python/hvd/compat/horovod or an installed hvd)");
    front = *dirs.compat;
  }
  if (dirs.package) front += (front.empty() ? "" : ":") + *dirs.package;
  if (front.empty()) return;
  auto it = env.find("PYTHONPATH");
  env["PYTHONPATH"] = it == env.end() || it->second.empty() ? front : front + ":" + it->second;
}

}  // namespace hvd::launcher
