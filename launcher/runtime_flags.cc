#include "launcher/runtime_flags.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
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

// How a config-file value becomes its variable's text.
enum class Kind { Megabytes, Number, Integer, Flag, NegatedFlag, Text, LogLevel };

struct ConfigKey {
  const char* key;       // section.key, as in Horovod's YAML config file
  const char* variable;  // the HVD_* variable it sets
  Kind kind;
};

constexpr ConfigKey kConfigKeys[] = {
    {"params.fusion_threshold_mb", "HVD_FUSION_THRESHOLD", Kind::Megabytes},
    {"params.cycle_time_ms", "HVD_CYCLE_TIME", Kind::Number},
    {"params.cache_capacity", "HVD_CACHE_CAPACITY", Kind::Integer},
    {"params.malloc_retain_mb", "HVD_MALLOC_RETAIN_MB", Kind::Integer},
    {"params.gradient_overlap", "HVD_GRADIENT_OVERLAP", Kind::Text},
    {"params.check_replicas", "HVD_CHECK_REPLICAS", Kind::Text},
    {"params.hierarchical_allreduce", "HVD_HIERARCHICAL_ALLREDUCE", Kind::Flag},
    {"params.hierarchical_allgather", "HVD_HIERARCHICAL_ALLGATHER", Kind::Flag},
    {"timeline.filename", "HVD_TIMELINE", Kind::Text},
    {"timeline.mark_cycles", "HVD_TIMELINE_MARK_CYCLES", Kind::Flag},
    {"autotune.enabled", "HVD_AUTOTUNE", Kind::Flag},
    {"autotune.log_file", "HVD_AUTOTUNE_LOG", Kind::Text},
    {"autotune.warmup_samples", "HVD_AUTOTUNE_WARMUP_SAMPLES", Kind::Integer},
    {"autotune.steps_per_sample", "HVD_AUTOTUNE_STEPS_PER_SAMPLE", Kind::Integer},
    {"autotune.bayes_opt_max_samples", "HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", Kind::Integer},
    {"autotune.gaussian_process_noise", "HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", Kind::Number},
    {"stall_check.enabled", "HVD_STALL_CHECK_DISABLE", Kind::NegatedFlag},
    {"stall_check.warning_time_seconds", "HVD_STALL_CHECK_TIME_SECONDS", Kind::Integer},
    {"stall_check.shutdown_time_seconds", "HVD_STALL_SHUTDOWN_TIME_SECONDS", Kind::Integer},
    {"stall_check.liveness_timeout_seconds", "HVD_LIVENESS_TIMEOUT_SECONDS", Kind::Integer},
    {"logging.level", "HVD_LOG_LEVEL", Kind::LogLevel},
    {"logging.with_timestamp", "HVD_LOG_HIDE_TIME", Kind::NegatedFlag},
};

// The variable's text for a file value; throws naming the file and key for a wrong type.
std::string convert(const ConfigKey& k, const json& v, const std::string& path) {
  std::string where = path + ": " + k.key;
  auto wrongType = [&](const char* expected) {
    return InvalidArgument(where + ": expected " + expected + ", got " + v.dump());
  };
  switch (k.kind) {
    case Kind::Megabytes:
    case Kind::Number:
      if (!v.is_number()) throw wrongType("a number");
      return k.kind == Kind::Megabytes ? megabytes(v.get<double>(), where) : number(v.get<double>());
    case Kind::Integer:
      if (!v.is_number_integer()) throw wrongType("a number");
      return std::to_string(v.get<long long>());
    case Kind::Flag:
    case Kind::NegatedFlag:
      if (!v.is_boolean()) throw wrongType("true or false");
      return v.get<bool>() == (k.kind == Kind::Flag) ? "1" : "0";
    case Kind::Text:
    case Kind::LogLevel: {
      if (!v.is_string()) throw wrongType("a string");
      std::string text = v.get<std::string>();
      return k.kind == Kind::LogLevel && text == "warning" ? "warn" : text;
    }
  }
  throw InternalError("config key " + std::string(k.key) + " has no conversion");
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
      const ConfigKey* known = nullptr;
      for (const auto& k : kConfigKeys)
        if (where == k.key) known = &k;
      if (!known) {
        std::string supported;
        for (const auto& k : kConfigKeys)
          supported += (supported.empty() ? "" : ", ") + std::string(k.key);
        throw InvalidArgument(path + ": " + where + " is not supported by hvd (supported: " +
                              supported + ")");
      }
      out[known->variable] = convert(*known, v, path);
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

}  // namespace

std::map<std::string, std::string> runtimeParams(const RuntimeFlags& flags) {
  std::map<std::string, std::string> out;
  if (!flags.configFile.empty()) readConfigFile(flags.configFile, out);
  if (flags.fusionThresholdMb)
    out["HVD_FUSION_THRESHOLD"] = megabytes(*flags.fusionThresholdMb, "--fusion-threshold-mb");
  if (flags.cycleTimeMs) out["HVD_CYCLE_TIME"] = number(*flags.cycleTimeMs);
  if (flags.cacheCapacity) out["HVD_CACHE_CAPACITY"] = std::to_string(*flags.cacheCapacity);
  if (flags.timelineFilename) out["HVD_TIMELINE"] = *flags.timelineFilename;
  if (flags.timelineMarkCycles) out["HVD_TIMELINE_MARK_CYCLES"] = "1";
  if (flags.stallWarningSeconds)
    out["HVD_STALL_CHECK_TIME_SECONDS"] = std::to_string(*flags.stallWarningSeconds);
  if (flags.stallShutdownSeconds)
    out["HVD_STALL_SHUTDOWN_TIME_SECONDS"] = std::to_string(*flags.stallShutdownSeconds);
  if (flags.noStallCheck) out["HVD_STALL_CHECK_DISABLE"] = "1";
  if (flags.bindTo) out["HVD_BIND_TO"] = *flags.bindTo;
  if (flags.transport) out["HVD_TRANSPORT"] = *flags.transport;
  if (flags.allreduceAlgorithm) out["HVD_ALLREDUCE_ALGORITHM"] = *flags.allreduceAlgorithm;
  if (flags.mallocRetainMb) out["HVD_MALLOC_RETAIN_MB"] = std::to_string(*flags.mallocRetainMb);
  if (flags.gradientOverlap) out["HVD_GRADIENT_OVERLAP"] = *flags.gradientOverlap;
  if (flags.checkReplicas) out["HVD_CHECK_REPLICAS"] = *flags.checkReplicas;
  if (flags.hierarchicalAllreduce)
    out["HVD_HIERARCHICAL_ALLREDUCE"] = *flags.hierarchicalAllreduce ? "1" : "0";
  if (flags.hierarchicalAllgather)
    out["HVD_HIERARCHICAL_ALLGATHER"] = *flags.hierarchicalAllgather ? "1" : "0";
  if (flags.autotune) out["HVD_AUTOTUNE"] = "1";
  if (flags.autotuneLogFile) out["HVD_AUTOTUNE_LOG"] = *flags.autotuneLogFile;
  if (flags.autotuneWarmupSamples)
    out["HVD_AUTOTUNE_WARMUP_SAMPLES"] = std::to_string(*flags.autotuneWarmupSamples);
  if (flags.autotuneStepsPerSample)
    out["HVD_AUTOTUNE_STEPS_PER_SAMPLE"] = std::to_string(*flags.autotuneStepsPerSample);
  if (flags.autotuneMaxSamples)
    out["HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] = std::to_string(*flags.autotuneMaxSamples);
  if (flags.autotuneNoise)
    out["HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"] = number(*flags.autotuneNoise);
  // Range and format checks, with the variable named, before any worker starts.
  for (const auto& [name, value] : out) {
    const auto& spec = params::spec(name);
    std::string what = name + " (from " +
                       (flags.configFile.empty() ? std::string("a flag") : "flags or " + flags.configFile) + ")";
    if (spec.type == params::ParamType::Int) params::parseInt(value, spec.min, spec.max, what);
    if (spec.type == params::ParamType::Double)
      params::parseDouble(value, static_cast<double>(spec.min), static_cast<double>(spec.max), what);
  }
  params::checkCombinations(workerValues(out));
  return out;
}

}  // namespace hvd::launcher
