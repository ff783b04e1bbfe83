#include "launcher/remote_hosts.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "common/error.h"
#include "common/params.h"
#include "launcher/ssh/ssh_config.h"

namespace hvd::launcher {
namespace {

std::string homeDirectory(const Environment& env) {
  if (auto it = env.find("HOME"); it != env.end() && !it->second.empty()) return it->second;
  passwd* pw = ::getpwuid(::getuid());
  return pw && pw->pw_dir ? pw->pw_dir : "/";
}

std::string currentUser(const Environment& env) {
  passwd* pw = ::getpwuid(::getuid());
  if (pw && pw->pw_name) return pw->pw_name;
  if (auto it = env.find("USER"); it != env.end()) return it->second;
  return "root";
}

}  // namespace

ssh::SshTarget sshTargetFor(const HostSlots& host, const SshOptions& options,
                            const Environment& env) {
  std::string home = homeDirectory(env);
  std::string configPath = home + "/.ssh/config";
  auto userConfig = ssh::loadSshConfig(configPath, host.host, home);
  auto systemConfig = ssh::loadSshConfig(ssh::kSystemSshConfig, host.host, home);
  // Which file set StrictHostKeyChecking, for messages: the user's wins.
  if (!userConfig.strictHostKeyChecking) configPath = ssh::kSystemSshConfig;
  auto config = ssh::mergeSshConfig(std::move(userConfig), systemConfig);
  ssh::SshTarget t;
  t.alias = host.host;
  t.address = config.hostName.empty() ? host.host : config.hostName;
  t.port = options.port ? options.port : config.port.value_or(22);
  t.user = !host.user.empty() ? host.user : !config.user.empty() ? config.user : currentUser(env);
  if (!options.identityFile.empty()) {
    struct stat st {};
    if (::stat(options.identityFile.c_str(), &st) != 0)
      throw InvalidArgument("--ssh-identity-file " + options.identityFile + ": no such file");
    t.identityFiles.push_back(options.identityFile);
  }
  for (const auto& f : config.identityFiles) t.identityFiles.push_back(f);
  for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"})
    t.identityFiles.push_back(home + "/.ssh/" + name);
  if (auto agent = env.find("SSH_AUTH_SOCK"); agent != env.end()) t.agentSocket = agent->second;
  // ssh_config(5)'s defaults; keys are appended to the first user file only.
  t.userKnownHosts = config.userKnownHostsFiles.value_or(
      std::vector<std::string>{home + "/.ssh/known_hosts", home + "/.ssh/known_hosts2"});
  t.globalKnownHosts = config.globalKnownHostsFiles.value_or(
      std::vector<std::string>{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"});
  if (options.hostKeyPolicy) {
    t.hostKeyPolicy = *options.hostKeyPolicy;
    t.hostKeyPolicySource =
        std::string("--ssh-strict-host-key-checking ") + ssh::hostKeyPolicyName(t.hostKeyPolicy);
  } else if (config.strictHostKeyChecking) {
    t.hostKeyPolicy = *config.strictHostKeyChecking;
    t.hostKeyPolicySource = std::string("StrictHostKeyChecking ") +
                            ssh::hostKeyPolicyName(t.hostKeyPolicy) + " in " + configPath;
  } else {
    t.hostKeyPolicy = ssh::HostKeyPolicy::AcceptNew;
    t.hostKeyPolicySource = "the default, accept-new";
  }
  t.connectTimeout = options.connectTimeout;
  return t;
}

std::size_t sshConcurrency(const SshOptions& options, const Environment& env) {
  if (options.concurrency > 0) return static_cast<std::size_t>(options.concurrency);
  return static_cast<std::size_t>(
      params::ParamValues::fromMap(env).getInt(params::ParamId::SshConcurrency));
}

std::map<std::string, std::string> parseNetworkInterfaces(const std::string& spec,
                                                          const std::vector<HostSlots>& hosts) {
  std::map<std::string, std::string> out;
  if (spec.empty()) return out;
  if (spec.find('=') == std::string::npos) {
    if (spec.find(',') != std::string::npos)
      throw InvalidArgument("--network-interface '" + spec +
                            "': give one interface for every host, or host=IFACE entries");
    out[""] = spec;
    return out;
  }
  std::stringstream in(spec);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      throw InvalidArgument("--network-interface: entry '" + entry + "' is not host=IFACE");
    std::string host = entry.substr(0, eq);
    bool known = false;
    for (const auto& h : hosts) known |= h.host == host;
    if (!known)
      throw InvalidArgument("--network-interface: host '" + host +
                            "' is not one of the job's "
                            "hosts (" +
                            describeHosts(hosts) + ")");
    if (!out.emplace(host, entry.substr(eq + 1)).second)
      throw InvalidArgument("--network-interface: host '" + host + "' is given twice");
  }
  return out;
}

std::string interfaceFor(const std::map<std::string, std::string>& interfaces,
                         const std::string& host) {
  if (auto it = interfaces.find(host); it != interfaces.end()) return it->second;
  if (auto it = interfaces.find(""); it != interfaces.end()) return it->second;
  return "";
}

}  // namespace hvd::launcher
