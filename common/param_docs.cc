#include "common/param_docs.h"

#include <algorithm>
#include <regex>

#include "common/error.h"

namespace hvd::params {
namespace {

std::string joined(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// The descriptions are Markdown for the docs; a terminal gets them without `code` marks and
// with [links](target) as their text.
std::string plainText(const std::string& markdown) {
  static const std::regex kLink(R"(\[([^\]]*)\]\([^)]*\))");
  std::string out = std::regex_replace(markdown, kLink, "$1");
  out.erase(std::remove(out.begin(), out.end(), '`'), out.end());
  return out;
}

// What sets the parameter besides its variable: "hvdrun --x, config file's params.x".
std::vector<std::string> setters(const ParamSpec& p, const std::string& quote) {
  std::vector<std::string> out;
  for (const auto& flag : flagSpellings(p.flag)) out.push_back(quote + flag + quote);
  if (!p.shortcut.name.empty()) out.push_back(quote + std::string(p.shortcut.name) + quote);
  if (!p.configKey.key.empty()) out.push_back(quote + std::string(p.configKey.key) + quote);
  return out;
}

std::string typeLine(const ParamSpec& p, const ParamValues& current) {
  bool isInt = p.type == ParamType::Int;
  bool isNumber = isInt || p.type == ParamType::Double;
  std::string value =
      current.isSet(p.id) ? (p.secret ? "(set)" : current.getString(p.id)) : "(default)";
  std::string out = detail::concat("    ",
                                   isInt      ? "integer"
                                   : isNumber ? "number"
                                              : "string",
                                   ", default ", p.defaultValue.empty() ? "unset" : p.defaultValue);
  if (isNumber) out += detail::concat(", range [", p.min, ", ", p.max, "]");
  if (!p.choices.empty()) out += ", one of " + joined(p.choices, ", ");
  return out + ", now " + value + "\n";
}

std::string docDefault(const ParamSpec& p) {
  if (p.defaultValue.empty()) return p.unsetMeans.empty() ? "unset" : std::string(p.unsetMeans);
  return p.type == ParamType::String ? "`" + p.defaultValue + "`" : p.defaultValue;
}

}  // namespace

std::vector<std::string> flagSpellings(const FlagSpec& flag) {
  std::vector<std::string> out;
  std::string names(flag.names);
  std::size_t start = 0;
  while (start < names.size()) {
    std::size_t comma = names.find(',', start);
    std::string name = names.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!name.empty() && name[0] == '!') name.erase(0, 1);
    out.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string describeAll(const ParamValues& current) {
  std::string out;
  for (const auto& p : allParams()) {
    out += p.name + (p.horovodAlias.empty() ? "" : " (also " + p.horovodAlias + ")") + "\n";
    out += typeLine(p, current) + "    " + plainText(p.description) + "\n";
    auto by = setters(p, "");
    if (!by.empty()) out += "    set by hvdrun's " + joined(by, ", ") + "\n";
    if (!p.configMember.empty())
      out += "    read into Config::" + std::string(p.configMember) + "\n";
  }
  return out;
}

std::vector<std::string> envDocTable() {
  std::vector<std::string> rows = {
      "| variable | Horovod name | hvdrun flag, config file key | default | meaning |",
      "| --- | --- | --- | --- | --- |"};
  for (const auto& p : allParams()) {
    std::string alias = p.horovodAlias.empty() ? "" : " `" + p.horovodAlias + "`";
    std::string by = joined(setters(p, "`"), ", ");
    rows.push_back("| `" + p.name + "` |" + alias + " | " + by + (by.empty() ? "" : " ") + "| " +
                   docDefault(p) + " | " + p.description + " |");
  }
  return rows;
}

}  // namespace hvd::params
