#include "launcher/runtime_flags.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/param_docs.h"
#include "common/params.h"

namespace hvd::launcher {
namespace {

using nlohmann::json;

std::string megabytes(double mb, const std::string& what) {
  if (!(mb >= 0) || mb > 1024.0 * 1024.0)
    throw InvalidArgument(detail::concat(what, "=", mb, ": must be between 0 and 1048576 MB"));
  return std::to_string(static_cast<long long>(std::llround(mb * 1024 * 1024)));
}

std::string number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

using params::ValueKind;

// The variable's text for a file value; throws naming the file and key for a wrong type.
std::string convert(const params::ConfigKeySpec& k, const json& v, const std::string& path) {
  std::string where = path + ": " + std::string(k.key);
  auto wrongType = [&](const char* expected) {
    return InvalidArgument(where + ": expected " + expected + ", got " + v.dump());
  };
  switch (k.kind) {
    case ValueKind::Megabytes:
    case ValueKind::Number:
      if (!v.is_number()) throw wrongType("a number");
      return k.kind == ValueKind::Megabytes ? megabytes(v.get<double>(), where)
                                            : number(v.get<double>());
    case ValueKind::Integer:
      if (!v.is_number_integer()) throw wrongType("a number");
      return std::to_string(v.get<long long>());
    case ValueKind::Switch:
    case ValueKind::NegatedSwitch:
      if (!v.is_boolean()) throw wrongType("true or false");
      return v.get<bool>() == (k.kind == ValueKind::Switch) ? "1" : "0";
    case ValueKind::Text:
    case ValueKind::LogLevel: {
      if (!v.is_string()) throw wrongType("a string");
      std::string text = v.get<std::string>();
      return k.kind == ValueKind::LogLevel && text == "warning" ? "warn" : text;
    }
    case ValueKind::None:
      break;
  }
  throw InternalError("config key " + std::string(k.key) + " has no conversion");
}

// The row whose config key is `where` ("section.key"), or null.
const params::ParamSpec* configKeyRow(const std::string& where) {
  for (const auto& p : params::allParams())
    if (!p.configKey.key.empty() && p.configKey.key == where) return &p;
  return nullptr;
}

std::string supportedConfigKeys() {
  std::string out;
  for (const auto& p : params::allParams())
    if (!p.configKey.key.empty()) out += (out.empty() ? "" : ", ") + std::string(p.configKey.key);
  return out;
}

// Horovod's config file sections and the keys hvd understands; keys Horovod has and hvd does not
// are named in the error so a user knows the setting was not silently dropped.
void readConfigFile(const std::string& path, std::map<std::string, std::string>& out) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--config-file " + path + ": cannot open the file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InvalidArgument("--config-file " + path + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object()) throw InvalidArgument(path + ": expected a JSON object of sections");
  for (const auto& [section, body] : doc.items()) {
    if (!body.is_object())
      throw InvalidArgument(path + ": section " + section + " must be an object");
    for (const auto& [key, v] : body.items()) {
      std::string where = section + "." + key;
      const params::ParamSpec* row = configKeyRow(where);
      if (!row)
        throw InvalidArgument(path + ": " + where + " is not supported by hvd (supported: " +
                              supportedConfigKeys() + ")");
      out[row->name] = convert(row->configKey, v, path);
    }
  }
}

// What the workers will see: hvdrun's environment with the flags on top.
params::ParamValues workerValues(const std::map<std::string, std::string>& fromFlags) {
  auto env = params::environmentSnapshot();
  for (const auto& [name, value] : fromFlags) {
    env[name] = value;
    const auto& alias = params::spec(name).horovodAlias;
    if (!alias.empty()) env.erase(alias);
  }
  return params::ParamValues::fromMap(env);
}

// A flag's value as its variable's text.
std::string flagText(const params::ParamSpec& p, const FlagValue& value) {
  switch (p.flag.kind) {
    case ValueKind::Megabytes:
      return megabytes(std::get<double>(value), params::flagSpellings(p.flag).front());
    case ValueKind::Number:
      return number(std::get<double>(value));
    case ValueKind::Integer:
      return std::to_string(std::get<long long>(value));
    case ValueKind::Switch:
      return std::get<bool>(value) ? "1" : "0";
    default:
      return std::get<std::string>(value);
  }
}

}  // namespace

std::map<std::string, std::string> runtimeParams(const RuntimeFlags& flags) {
  std::map<std::string, std::string> out;
  if (!flags.configFile.empty()) readConfigFile(flags.configFile, out);
  for (const auto& [id, value] : flags.given) {
    const params::ParamSpec& p = params::spec(id);
    // hvdrun acts on the others itself, and exports them where workers need them.
    if (p.flag.target == params::FlagTarget::Workers) out[p.name] = flagText(p, value);
  }
  // Range and format checks, with the variable named, before any worker starts.
  for (const auto& [name, value] : out) {
    const auto& spec = params::spec(name);
    std::string what =
        name + " (from " +
        (flags.configFile.empty() ? std::string("a flag") : "flags or " + flags.configFile) + ")";
    if (spec.type == params::ParamType::Int) params::parseInt(value, spec.min, spec.max, what);
    if (spec.type == params::ParamType::Double)
      params::parseDouble(value, static_cast<double>(spec.min), static_cast<double>(spec.max),
                          what);
  }
  params::checkCombinations(workerValues(out));
  return out;
}

}  // namespace hvd::launcher
