#include "launcher/ssh/ssh_preflight.h"

#include <thread>

#include "common/logging.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher::ssh {
namespace {

struct Outcome {
  std::string failure;
  std::string localAddress;
};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

Outcome check(const PreflightHost& host) {
  Outcome out;
  try {
    auto session = SshSession::connect(host.target);
    out.localAddress = session->localAddress();
    auto result = session->run(bootstrapCommand(), framed(host.checkScript),
                               host.target.connectTimeout);
    if (result.exitCode != 0) {
      std::string why = trimmed(result.err);
      if (why.empty()) why = "the check script exited with status " + std::to_string(result.exitCode);
      out.failure = session->where() + why;
    }
  } catch (const Error& e) {
    out.failure = e.what();
  }
  return out;
}

}  // namespace

PreflightReport preflight(const std::vector<PreflightHost>& hosts) {
  std::vector<Outcome> outcomes(hosts.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    threads.emplace_back([&, i] { outcomes[i] = check(hosts[i]); });
  for (auto& t : threads) t.join();
  PreflightReport report;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (!outcomes[i].failure.empty())
      report.failures.push_back(outcomes[i].failure);
    else
      report.localAddressByHost[hosts[i].target.alias] = outcomes[i].localAddress;
  }
  return report;
}

}  // namespace hvd::launcher::ssh
