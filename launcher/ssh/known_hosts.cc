#include "launcher/ssh/known_hosts.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>

#include "common/error.h"
#include "common/logging.h"

namespace hvd::launcher::ssh {
namespace {

constexpr int kKeyTypes[] = {LIBSSH2_KNOWNHOST_KEY_ED25519,   LIBSSH2_KNOWNHOST_KEY_ECDSA_256,
                             LIBSSH2_KNOWNHOST_KEY_ECDSA_384, LIBSSH2_KNOWNHOST_KEY_ECDSA_521,
                             LIBSSH2_KNOWNHOST_KEY_SSHRSA,    LIBSSH2_KNOWNHOST_KEY_SSHDSS};

// A key no real entry holds: checkp with it answers MISMATCH exactly when the host is listed
// under the probed key type, which is how entries are found without comparing hashed names here.
constexpr char kProbeKey[] = "AA==";

// The files are shared by every session's thread (preflight threads, elastic rounds): reads and
// appends take this lock. `logged` keeps a warning about one line from repeating for every host.
struct SharedFiles {
  std::mutex mutex;
  std::set<std::string> logged;
};
SharedFiles& sharedFiles() {
  static SharedFiles shared;
  return shared;
}

std::string firstWord(const std::string& s, std::size_t from = 0) {
  auto start = s.find_first_not_of(" \t", from);
  if (start == std::string::npos) return "";
  return s.substr(start, s.find_first_of(" \t", start) - start);
}

}  // namespace

KnownHostsLine splitKnownHostsLine(const std::string& text) {
  KnownHostsLine out;
  std::string s = text;
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n')) s.pop_back();
  auto start = s.find_first_not_of(" \t");
  if (start == std::string::npos || s[start] == '#') return out;
  s.erase(0, start);
  out.kind = KnownHostsLine::Kind::Entry;
  if (s[0] == '@') {
    out.marker = firstWord(s);
    if (out.marker == "@revoked")
      out.kind = KnownHostsLine::Kind::Revoked;
    else if (out.marker == "@cert-authority")
      out.kind = KnownHostsLine::Kind::CertAuthority;
    else
      out.kind = KnownHostsLine::Kind::BadMarker;
    auto rest = s.find_first_not_of(" \t", out.marker.size());
    s = rest == std::string::npos ? "" : s.substr(rest);
  }
  out.entry = s;
  auto hostEnd = s.find_first_of(" \t");
  if (hostEnd != std::string::npos) out.keyType = firstWord(s, hostEnd);
  return out;
}

int knownHostKeyType(int hostKeyType) {
  switch (hostKeyType) {
    case LIBSSH2_HOSTKEY_TYPE_RSA:
      return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
    case LIBSSH2_HOSTKEY_TYPE_DSS:
      return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
      return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
      return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
      return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
    case LIBSSH2_HOSTKEY_TYPE_ED25519:
      return LIBSSH2_KNOWNHOST_KEY_ED25519;
    default:
      return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
  }
}

std::string keyTypeName(int knownHostKeyType) {
  switch (knownHostKeyType) {
    case LIBSSH2_KNOWNHOST_KEY_SSHRSA:
      return "ssh-rsa";
    case LIBSSH2_KNOWNHOST_KEY_SSHDSS:
      return "ssh-dss";
    case LIBSSH2_KNOWNHOST_KEY_ECDSA_256:
      return "ecdsa-sha2-nistp256";
    case LIBSSH2_KNOWNHOST_KEY_ECDSA_384:
      return "ecdsa-sha2-nistp384";
    case LIBSSH2_KNOWNHOST_KEY_ECDSA_521:
      return "ecdsa-sha2-nistp521";
    case LIBSSH2_KNOWNHOST_KEY_ED25519:
      return "ssh-ed25519";
    case LIBSSH2_KNOWNHOST_KEY_RSA1:
      return "rsa1";
    default:
      return "(a key type libssh2 does not know)";
  }
}

KnownHosts::KnownHosts(LIBSSH2_SESSION* session) : session_(session) {
  known_ = libssh2_knownhost_init(session);
  revoked_ = libssh2_knownhost_init(session);
  if (!known_ || !revoked_) {
    if (known_) libssh2_knownhost_free(known_);
    if (revoked_) libssh2_knownhost_free(revoked_);
    throw IoError("libssh2_knownhost_init failed");
  }
}

KnownHosts::~KnownHosts() {
  libssh2_knownhost_free(known_);
  libssh2_knownhost_free(revoked_);
}

std::string KnownHosts::lastError() const {
  char* msg = nullptr;
  int len = 0;
  libssh2_session_last_error(session_, &msg, &len, 0);
  return msg && len > 0 ? std::string(msg, len) : "unknown libssh2 error";
}

bool KnownHosts::feed(LIBSSH2_KNOWNHOSTS* into, libssh2_knownhost*& last, Locations& locations,
                      const KnownHostsLine& line, const KnownHostsLocation& where,
                      std::string& error) {
  int rc = libssh2_knownhost_readline(into, line.entry.c_str(), line.entry.size(),
                                      LIBSSH2_KNOWNHOST_FILE_OPENSSH);
  if (rc != 0) error = lastError();
  // A line naming several hosts adds one entry per name; a failure may come after some.
  int added = 0;
  for (libssh2_knownhost* next = nullptr; libssh2_knownhost_get(into, &next, last) == 0;
       last = next, ++added)
    locations[next] = {line.keyType, where};
  // libssh2 accepts a hashed name without its second '|' yet adds nothing.
  if (rc == 0 && added == 0) error = "no host name could be read from it";
  return rc == 0 && added > 0;
}

void KnownHosts::addLine(const std::string& text, const KnownHostsLocation& where) {
  KnownHostsLine line = splitKnownHostsLine(text);
  std::string error;
  switch (line.kind) {
    case KnownHostsLine::Kind::Skip:
    case KnownHostsLine::Kind::CertAuthority:
      return;
    case KnownHostsLine::Kind::BadMarker:
      warnings_.push_back(where.describe() + ": unknown marker " + line.marker +
                          " (known: @revoked, @cert-authority); line skipped");
      return;
    case KnownHostsLine::Kind::Revoked:
      if (!feed(revoked_, lastRevoked_, revokedAt_, line, where, error))
        warnings_.push_back(where.describe() + ": cannot parse this @revoked line (" + error +
                            "); skipped, so the key it revokes is not refused");
      return;
    case KnownHostsLine::Kind::Entry:
      if (!feed(known_, lastKnown_, knownAt_, line, where, error))
        warnings_.push_back(where.describe() + ": cannot parse this known_hosts line (" + error +
                            "); skipped, the rest of the file is still used");
      return;
  }
}

void KnownHosts::addFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR)
      warnings_.push_back(path + ": cannot read it (" + std::strerror(errno) + "); not used");
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    warnings_.push_back(path + ": is a directory, not a known_hosts file; not used");
    return;
  }
  std::ifstream in(path);
  if (!in) {
    warnings_.push_back(path + ": cannot open it (" + std::strerror(errno) + "); not used");
    return;
  }
  std::string text;
  int lineNo = 0;
  while (std::getline(in, text)) addLine(text, {path, ++lineNo});
  if (in.bad())
    warnings_.push_back(path + ": read error after line " + std::to_string(lineNo) +
                        "; the rest of the file is not used");
}

int KnownHosts::lookup(LIBSSH2_KNOWNHOSTS* in, const Locations& locations, const std::string& host,
                       int port, const std::string& base64, int keyTypeMask,
                       KnownHostsVerdict::Line* line) const {
  libssh2_knownhost* found = nullptr;
  int rc = libssh2_knownhost_checkp(
      in, host.c_str(), port, base64.c_str(), base64.size(),
      LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_BASE64 | keyTypeMask, &found);
  if (rc == LIBSSH2_KNOWNHOST_CHECK_FAILURE)
    throw IoError("cannot look '" + host + "' up in known_hosts: " + lastError());
  if (line && found)
    if (auto it = locations.find(found); it != locations.end()) *line = it->second;
  return rc;
}

std::vector<std::pair<int, KnownHostsVerdict::Line>> KnownHosts::listedTypes(
    const std::string& host, int port) const {
  std::vector<std::pair<int, KnownHostsVerdict::Line>> out;
  KnownHostsVerdict::Line line;
  for (int type : kKeyTypes)
    if (lookup(known_, knownAt_, host, port, kProbeKey, type, &line) ==
        LIBSSH2_KNOWNHOST_CHECK_MISMATCH)
      out.emplace_back(type, line);
  // Key type 0 matches entries of every type, those libssh2 cannot name too.
  if (out.empty() &&
      lookup(known_, knownAt_, host, port, kProbeKey, 0, &line) == LIBSSH2_KNOWNHOST_CHECK_MISMATCH)
    out.emplace_back(LIBSSH2_KNOWNHOST_KEY_UNKNOWN, line);
  return out;
}

KnownHostsVerdict KnownHosts::check(const std::string& host, int port,
                                    const OfferedKey& key) const {
  using Kind = KnownHostsVerdict::Kind;
  KnownHostsVerdict verdict;
  KnownHostsVerdict::Line line;
  if (lookup(revoked_, revokedAt_, host, port, key.base64, key.type, &line) ==
      LIBSSH2_KNOWNHOST_CHECK_MATCH) {
    verdict.kind = Kind::Revoked;
    verdict.lines.push_back(line);
    return verdict;
  }
  switch (lookup(known_, knownAt_, host, port, key.base64, key.type, &line)) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
      verdict.kind = Kind::Match;
      return verdict;
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
      verdict.kind = Kind::Changed;
      verdict.lines.push_back(line);
      return verdict;
    default:
      break;
  }
  for (const auto& [type, where] : listedTypes(host, port)) verdict.lines.push_back(where);
  verdict.kind = verdict.lines.empty() ? Kind::Unknown : Kind::OtherTypes;
  return verdict;
}

std::vector<int> KnownHosts::keyTypesFor(const std::string& host, int port) const {
  std::vector<int> out;
  for (const auto& [type, where] : listedTypes(host, port))
    if (type != LIBSSH2_KNOWNHOST_KEY_UNKNOWN) out.push_back(type);
  return out;
}

std::string KnownHosts::lineFor(const std::string& host, int port, const OfferedKey& key) const {
  std::unique_ptr<LIBSSH2_KNOWNHOSTS, decltype(&libssh2_knownhost_free)> scratch(
      libssh2_knownhost_init(session_), libssh2_knownhost_free);
  if (!scratch) throw IoError("libssh2_knownhost_init failed");
  // known_hosts names non-standard ports as [host]:port.
  std::string name = port == 22 ? host : "[" + host + "]:" + std::to_string(port);
  libssh2_knownhost* added = nullptr;
  if (libssh2_knownhost_addc(
          scratch.get(), name.c_str(), nullptr, key.base64.c_str(), key.base64.size(), nullptr, 0,
          LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_BASE64 | key.type, &added) != 0)
    throw IoError("cannot record the host key of " + name + ": " + lastError());
  char line[8192];
  std::size_t length = 0;
  if (libssh2_knownhost_writeline(scratch.get(), added, line, sizeof line, &length,
                                  LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
    throw IoError("cannot format the host key of " + name + ": " + lastError());
  return std::string(line, length);
}

void loadKnownHosts(KnownHosts& into, const std::vector<std::string>& files) {
  SharedFiles& shared = sharedFiles();
  std::lock_guard<std::mutex> lock(shared.mutex);
  std::size_t before = into.warnings().size();
  for (const auto& file : files) into.addFile(file);
  for (std::size_t i = before; i < into.warnings().size(); ++i)
    if (shared.logged.insert(into.warnings()[i]).second)
      log::logger("ssh")->warn("{}", into.warnings()[i]);
}

void appendKnownHost(const std::string& path, const std::string& line) {
  std::lock_guard<std::mutex> lock(sharedFiles().mutex);
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) ::mkdir(path.substr(0, slash).c_str(), 0700);
  std::ofstream out(path, std::ios::app);
  out << line;
  if (!line.empty() && line.back() != '\n') out << '\n';
  if (!out) throw IoError("cannot append to " + path + ": " + std::strerror(errno));
}

}  // namespace hvd::launcher::ssh
