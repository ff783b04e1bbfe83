#include "common/params.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "common/error.h"

extern char** environ;

namespace hvd::params {

namespace {
std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}
}  // namespace

int64_t parseInt(const std::string& text, int64_t min, int64_t max, const std::string& what) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw InvalidArgument(what + "='" + text + "': not an integer");
  if (value < min || value > max)
    throw InvalidArgument(
        detail::concat(what, "=", value, ": out of range [", min, ", ", max, "]"));
  return value;
}

double parseDouble(const std::string& text, double min, double max, const std::string& what) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw InvalidArgument(what + "='" + text + "': not a number");
  if (!(value >= min && value <= max))
    throw InvalidArgument(
        detail::concat(what, "=", value, ": out of range [", min, ", ", max, "]"));
  return value;
}

void checkCombinations(const ParamValues& v) {
  bool autotune = v.getInt(ParamId::Autotune) == 1;
  const std::string& autotuneLog = v.getString(ParamId::AutotuneLog);
  if (!autotune && !autotuneLog.empty())
    throw InvalidArgument("--autotune-log-file (" + envName(ParamId::AutotuneLog) + "=" +
                          autotuneLog + ") needs --autotune (" + envName(ParamId::Autotune) +
                          "=1)");
  if (autotune && v.isSet(ParamId::FusionThreshold) && v.isSet(ParamId::CycleTime))
    throw InvalidArgument(
        "--autotune tunes the fusion threshold and the cycle time, but both "
        "are given (--fusion-threshold-mb/" +
        envName(ParamId::FusionThreshold) + " and --cycle-time-ms/" + envName(ParamId::CycleTime) +
        "), which fixes them: leave one out");
  if (v.getInt(ParamId::TimelineMarkCycles) == 1 && v.getString(ParamId::Timeline).empty())
    throw InvalidArgument("--timeline-mark-cycles (" + envName(ParamId::TimelineMarkCycles) +
                          "=1) needs a timeline (--timeline-filename, " +
                          envName(ParamId::Timeline) + ")");
}

std::map<std::string, std::string> environmentSnapshot() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

ParamValues ParamValues::fromEnvironment() { return fromMap(environmentSnapshot()); }

ParamValues ParamValues::fromMap(const std::map<std::string, std::string>& env) {
  ParamValues out;
  for (const auto& p : allParams()) {
    Value v;
    v.text = p.defaultValue;
    std::string from = p.name;
    auto it = env.find(p.name);
    if (it == env.end() && !p.horovodAlias.empty()) {
      it = env.find(p.horovodAlias);
      from = p.horovodAlias;
    }
    if (it != env.end()) {
      v.text = it->second;
      v.source = Source::Environment;
    }
    if (!p.choices.empty() &&
        std::find(p.choices.begin(), p.choices.end(), v.text) == p.choices.end())
      throw InvalidArgument(from + "='" + v.text + "': expected one of " + joined(p.choices));
    if (p.type == ParamType::Int) v.number = parseInt(v.text, p.min, p.max, from);
    if (p.type == ParamType::Double)
      v.real = parseDouble(v.text, static_cast<double>(p.min), static_cast<double>(p.max), from);
    out.values_.push_back(std::move(v));
  }
  return out;
}

int64_t ParamValues::getInt(ParamId id) const {
  HVD_ENFORCE(spec(id).type == ParamType::Int, envName(id), " is not an integer parameter");
  return values_.at(static_cast<std::size_t>(id)).number;
}

double ParamValues::getDouble(ParamId id) const {
  HVD_ENFORCE(spec(id).type == ParamType::Double, envName(id), " is not a real-valued parameter");
  return values_.at(static_cast<std::size_t>(id)).real;
}

const std::string& ParamValues::getString(ParamId id) const {
  return values_.at(static_cast<std::size_t>(id)).text;
}

bool ParamValues::isSet(ParamId id) const { return source(id) == Source::Environment; }

Source ParamValues::source(ParamId id) const {
  return values_.at(static_cast<std::size_t>(id)).source;
}

}  // namespace hvd::params
