#include "launcher/ssh/host_key_check.h"

#include <algorithm>

namespace hvd::launcher::ssh {
namespace {

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Every file the check read, for messages.
std::string filesRead(const SshTarget& t) {
  std::vector<std::string> files = t.userKnownHosts;
  files.insert(files.end(), t.globalKnownHosts.begin(), t.globalKnownHosts.end());
  return files.empty() ? "(no known_hosts file: UserKnownHostsFile and GlobalKnownHostsFile are "
                         "none)"
                       : joined(files, ", ");
}

// "ssh-keygen -R NAME -f FILE" for each file holding one of `lines`.
std::string removeCommands(const SshTarget& t, const std::vector<KnownHostsVerdict::Line>& lines) {
  std::vector<std::string> commands;
  for (const auto& line : lines) {
    std::string c = "ssh-keygen -R '" + knownHostsName(t) + "' -f " + line.where.file;
    if (std::find(commands.begin(), commands.end(), c) == commands.end()) commands.push_back(c);
  }
  return joined(commands, "; ");
}

std::string userFile(const SshTarget& t) {
  return t.userKnownHosts.empty() ? "~/.ssh/known_hosts" : t.userKnownHosts.front();
}

HostKeyDecision refuse(SshFailure failure, std::string message) {
  return {HostKeyDecision::Action::Refuse, failure, std::move(message)};
}

int algorithmKeyType(const std::string& name) {
  if (name.find("-cert-") != std::string::npos) return 0;
  if (name.rfind("ssh-ed25519", 0) == 0) return LIBSSH2_KNOWNHOST_KEY_ED25519;
  if (name.rfind("ecdsa-sha2-nistp256", 0) == 0) return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
  if (name.rfind("ecdsa-sha2-nistp384", 0) == 0) return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
  if (name.rfind("ecdsa-sha2-nistp521", 0) == 0) return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
  if (name == "ssh-rsa" || name.rfind("rsa-sha2-", 0) == 0) return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
  if (name == "ssh-dss") return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
  return 0;
}

}  // namespace

std::string knownHostsName(const SshTarget& target) {
  return target.port == 22 ? target.address
                           : "[" + target.address + "]:" + std::to_string(target.port);
}

HostKeyDecision decideHostKey(const SshTarget& t, const KnownHostsVerdict& verdict,
                              const OfferedHostKey& offered) {
  using Kind = KnownHostsVerdict::Kind;
  const std::string key = offered.type + " " + offered.fingerprint;
  switch (verdict.kind) {
    case Kind::Match:
      return {};
    case Kind::Revoked:
      return refuse(SshFailure::HostKeyRevoked,
                    "HOST KEY REVOKED: the host offers the key " + key + ", which " +
                        verdict.lines.front().where.describe() +
                        " marks @revoked; the host needs a new key (ask its administrator)");
    case Kind::Changed:
      return refuse(SshFailure::HostKeyChanged,
                    "HOST KEY CHANGED: the host now offers " + offered.fingerprint +
                        ", which does not match " + verdict.lines.front().where.describe() +
                        "; someone may be intercepting the connection, or the host was "
                        "reinstalled (remove its old line with ssh-keygen -R after checking: " +
                        removeCommands(t, verdict.lines) + ")");
    case Kind::OtherTypes: {
      std::vector<std::string> known;
      for (const auto& line : verdict.lines)
        known.push_back(line.keyType + " (" + line.where.describe() + ")");
      return refuse(SshFailure::HostKeyChanged,
                    "HOST KEY TYPE CHANGED: the host offers the key " + key +
                        ", but known_hosts lists it only under " + joined(known, ", ") +
                        ", and the host offered none of those; someone may be intercepting the "
                        "connection, or the host's keys were replaced. hvdrun does not add a key "
                        "of another type for a known host. After checking the new key with the "
                        "host's administrator, remove the old lines (" +
                        removeCommands(t, verdict.lines) +
                        "; the next run records the new key), or add the host's " + offered.type +
                        " key to " + userFile(t));
    }
    case Kind::Unknown:
      break;
  }
  if (t.hostKeyPolicy == HostKeyPolicy::Strict) {
    std::string port = std::to_string(t.port);
    return refuse(SshFailure::HostKeyUnknown,
                  "host key " + key + " is not in " + filesRead(t) +
                      ", and strict host key checking is on (" + t.hostKeyPolicySource +
                      "); after checking the fingerprint with the host's administrator, add "
                      "it: ssh-keyscan -p " +
                      port + " " + t.address + " >> " + userFile(t) +
                      " (or log in once with ssh -p " + port + " " + t.user + "@" + t.address +
                      "), or use --ssh-strict-host-key-checking accept-new");
  }
  if (t.userKnownHosts.empty())
    return {HostKeyDecision::Action::Accept, SshFailure::Protocol,
            "host key " + key + " accepted but not recorded: UserKnownHostsFile is none"};
  return {HostKeyDecision::Action::Record, SshFailure::Protocol,
          "permanently added host key " + key + " to " + t.userKnownHosts.front()};
}

std::string hostKeyAlgorithmPreference(const std::vector<std::string>& supported,
                                       const std::vector<int>& knownTypes) {
  std::vector<std::string> first, rest;
  for (const auto& name : supported) {
    int type = algorithmKeyType(name);
    bool known =
        type != 0 && std::find(knownTypes.begin(), knownTypes.end(), type) != knownTypes.end();
    (known ? first : rest).push_back(name);
  }
  if (first.empty()) return "";
  first.insert(first.end(), rest.begin(), rest.end());
  return joined(first, ",");
}

}  // namespace hvd::launcher::ssh
