#include "launcher/ssh/ssh_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/params.h"

namespace hvd::launcher::ssh {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Splits "Key value", "Key=value" and "Key = value"; strips quotes around the value.
bool splitLine(const std::string& raw, std::string& key, std::vector<std::string>& values) {
  std::string line = raw.substr(0, raw.find('#'));
  auto start = line.find_first_not_of(" \t\r");
  if (start == std::string::npos) return false;
  line = line.substr(start);
  auto keyEnd = line.find_first_of(" \t=");
  key = lower(line.substr(0, keyEnd));
  std::string rest = keyEnd == std::string::npos ? "" : line.substr(keyEnd);
  auto valueStart = rest.find_first_not_of(" \t");
  if (valueStart != std::string::npos && rest[valueStart] == '=')
    valueStart = rest.find_first_not_of(" \t", valueStart + 1);
  values.clear();
  if (valueStart == std::string::npos) return true;
  std::string v;
  bool quoted = false;
  for (std::size_t i = valueStart; i < rest.size(); ++i) {
    char c = rest[i];
    if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && (c == ' ' || c == '\t' || c == '\r')) {
      if (!v.empty()) values.push_back(v);
      v.clear();
    } else {
      v += c;
    }
  }
  if (!v.empty()) values.push_back(v);
  return true;
}

// A Host line applies when some pattern matches and no negated pattern does.
bool hostLineApplies(const std::vector<std::string>& patterns, const std::string& host) {
  bool matched = false;
  for (const auto& p : patterns) {
    if (!p.empty() && p[0] == '!') {
      if (hostPatternMatches(p.substr(1), host)) return false;
    } else if (hostPatternMatches(p, host)) {
      matched = true;
    }
  }
  return matched;
}

std::string expandHome(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.rfind("~/", 0) == 0) return home + path.substr(1);
  return path;
}

// UserKnownHostsFile / GlobalKnownHostsFile: several files, or `none` for no file.
std::vector<std::string> knownHostsFiles(const std::vector<std::string>& values,
                                         const std::string& home) {
  std::vector<std::string> files;
  if (values.size() == 1 && lower(values[0]) == "none") return files;
  for (const auto& v : values) files.push_back(expandHome(v, home));
  return files;
}

}  // namespace

bool hostPatternMatches(const std::string& pattern, const std::string& host) {
  // Iterative glob with backtracking to the last '*'.
  std::size_t p = 0, h = 0, star = std::string::npos, mark = 0;
  while (h < host.size()) {
    if (p < pattern.size() &&
        (pattern[p] == '?' || std::tolower(static_cast<unsigned char>(pattern[p])) ==
                                  std::tolower(static_cast<unsigned char>(host[h])))) {
      ++p;
      ++h;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = h;
    } else if (star != std::string::npos) {
      p = star + 1;
      h = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

SshHostConfig lookupSshConfig(const std::string& text, const std::string& path,
                              const std::string& host, const std::string& home) {
  SshHostConfig out;
  std::istringstream in(text);
  std::string line, key;
  std::vector<std::string> values;
  bool active = true;  // lines before the first Host block apply to every host
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!splitLine(line, key, values)) continue;
    if (key == "host") {
      active = hostLineApplies(values, host);
      continue;
    }
    if (key == "match") {
      active = false;
      continue;
    }
    if (!active || values.empty()) continue;
    if (key == "hostname" && out.hostName.empty()) {
      out.hostName = values[0];
    } else if (key == "user" && out.user.empty()) {
      out.user = values[0];
    } else if (key == "port" && !out.port) {
      out.port = static_cast<int>(
          params::parseInt(values[0], 1, 65535, detail::concat(path, ":", lineNo, ": Port")));
    } else if (key == "identityfile") {
      out.identityFiles.push_back(expandHome(values[0], home));
    } else if (key == "stricthostkeychecking" && !out.strictHostKeyChecking) {
      out.strictHostKeyChecking = parseHostKeyPolicy(values[0]);
      if (!out.strictHostKeyChecking)
        throw InvalidArgument(detail::concat(path, ":", lineNo, ": StrictHostKeyChecking '",
                                             values[0],
                                             "': expected yes, accept-new or no (or ask, off)"));
    } else if (key == "userknownhostsfile" && !out.userKnownHostsFiles) {
      out.userKnownHostsFiles = knownHostsFiles(values, home);
    } else if (key == "globalknownhostsfile" && !out.globalKnownHostsFiles) {
      out.globalKnownHostsFiles = knownHostsFiles(values, home);
    }
  }
  // ssh_config(5): %h in HostName stands for the name given on the command line.
  if (auto pos = out.hostName.find("%h"); pos != std::string::npos)
    out.hostName.replace(pos, 2, host);
  return out;
}

SshHostConfig loadSshConfig(const std::string& path, const std::string& host,
                            const std::string& home) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return lookupSshConfig(text.str(), path, host, home);
}

SshHostConfig mergeSshConfig(SshHostConfig first, const SshHostConfig& later) {
  if (first.hostName.empty()) first.hostName = later.hostName;
  if (first.user.empty()) first.user = later.user;
  if (!first.port) first.port = later.port;
  first.identityFiles.insert(first.identityFiles.end(), later.identityFiles.begin(),
                             later.identityFiles.end());
  if (!first.strictHostKeyChecking) first.strictHostKeyChecking = later.strictHostKeyChecking;
  if (!first.userKnownHostsFiles) first.userKnownHostsFiles = later.userKnownHostsFiles;
  if (!first.globalKnownHostsFiles) first.globalKnownHostsFiles = later.globalKnownHostsFiles;
  return first;
}

}  // namespace hvd::launcher::ssh
