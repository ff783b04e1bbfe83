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

struct FileReader {
  std::string path;
  const json& value(const json& section, const std::string& sectionName,
                    const std::string& key, json::value_t type) const {
    const json& v = section.at(key);
    bool ok = type == json::value_t::number_float ? v.is_number()
              : type == json::value_t::number_integer ? v.is_number_integer()
              : v.type() == type;
    if (!ok)
      throw InvalidArgument(detail::concat(path, ": ", sectionName, ".", key, ": expected ",
                                           type == json::value_t::boolean  ? "true or false"
                                           : type == json::value_t::string ? "a string"
                                                                           : "a number",
                                           ", got ", v.dump()));
    return v;
  }
};

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
  FileReader f{path};
  using T = json::value_t;
  for (const auto& [section, body] : doc.items()) {
    if (!body.is_object())
      throw InvalidArgument(path + ": section " + section + " must be an object");
    for (const auto& [key, v] : body.items()) {
      std::string where = section + "." + key;
      if (where == "params.fusion_threshold_mb")
        out["HVD_FUSION_THRESHOLD"] =
            megabytes(f.value(body, section, key, T::number_float).get<double>(), path + ": " + where);
      else if (where == "params.cycle_time_ms")
        out["HVD_CYCLE_TIME"] = number(f.value(body, section, key, T::number_float).get<double>());
      else if (where == "params.cache_capacity")
        out["HVD_CACHE_CAPACITY"] =
            std::to_string(f.value(body, section, key, T::number_integer).get<long long>());
      else if (where == "params.hierarchical_allreduce")
        out["HVD_HIERARCHICAL_ALLREDUCE"] =
            f.value(body, section, key, T::boolean).get<bool>() ? "1" : "0";
      else if (where == "params.hierarchical_allgather")
        out["HVD_HIERARCHICAL_ALLGATHER"] =
            f.value(body, section, key, T::boolean).get<bool>() ? "1" : "0";
      else if (where == "timeline.filename")
        out["HVD_TIMELINE"] = f.value(body, section, key, T::string).get<std::string>();
      else if (where == "timeline.mark_cycles")
        out["HVD_TIMELINE_MARK_CYCLES"] =
            f.value(body, section, key, T::boolean).get<bool>() ? "1" : "0";
      else if (where == "logging.with_timestamp")
        out["HVD_LOG_HIDE_TIME"] = f.value(body, section, key, T::boolean).get<bool>() ? "0" : "1";
      else if (where == "stall_check.enabled")
        out["HVD_STALL_CHECK_DISABLE"] =
            f.value(body, section, key, T::boolean).get<bool>() ? "0" : "1";
      else if (where == "stall_check.warning_time_seconds")
        out["HVD_STALL_CHECK_TIME_SECONDS"] =
            std::to_string(f.value(body, section, key, T::number_integer).get<long long>());
      else if (where == "stall_check.shutdown_time_seconds")
        out["HVD_STALL_SHUTDOWN_TIME_SECONDS"] =
            std::to_string(f.value(body, section, key, T::number_integer).get<long long>());
      else if (where == "autotune.enabled")
        out["HVD_AUTOTUNE"] = f.value(body, section, key, T::boolean).get<bool>() ? "1" : "0";
      else if (where == "autotune.log_file")
        out["HVD_AUTOTUNE_LOG"] = f.value(body, section, key, T::string).get<std::string>();
      else if (where == "autotune.warmup_samples")
        out["HVD_AUTOTUNE_WARMUP_SAMPLES"] =
            std::to_string(f.value(body, section, key, T::number_integer).get<long long>());
      else if (where == "autotune.steps_per_sample")
        out["HVD_AUTOTUNE_STEPS_PER_SAMPLE"] =
            std::to_string(f.value(body, section, key, T::number_integer).get<long long>());
      else if (where == "autotune.bayes_opt_max_samples")
        out["HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] =
            std::to_string(f.value(body, section, key, T::number_integer).get<long long>());
      else if (where == "autotune.gaussian_process_noise")
        out["HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"] =
            number(f.value(body, section, key, T::number_float).get<double>());
      else if (where == "logging.level") {
        std::string level = f.value(body, section, key, T::string).get<std::string>();
        out["HVD_LOG_LEVEL"] = level == "warning" ? "warn" : level;
      } else
        throw InvalidArgument(
            path + ": " + where +
            " is not supported by hvd (supported: params.fusion_threshold_mb, "
            "params.cycle_time_ms, params.cache_capacity, params.hierarchical_allreduce, "
            "params.hierarchical_allgather, timeline.filename, timeline.mark_cycles, autotune.enabled, "
            "autotune.log_file, autotune.warmup_samples, autotune.steps_per_sample, "
            "autotune.bayes_opt_max_samples, autotune.gaussian_process_noise, "
            "stall_check.enabled, stall_check.warning_time_seconds, "
            "stall_check.shutdown_time_seconds, logging.level, logging.with_timestamp)");
    }
  }
}

// The workers' Config refuses these combinations too; checking here fails the job before any
// worker starts. What the workers see is hvdrun's environment with the flags on top.
void checkCombinations(const std::map<std::string, std::string>& fromFlags) {
  auto env = params::environmentSnapshot();
  for (const auto& [name, value] : fromFlags) {
    env[name] = value;
    const auto& alias = params::spec(name).horovodAlias;
    if (!alias.empty()) env.erase(alias);
  }
  auto values = params::ParamValues::fromMap(env);
  bool autotune = values.getInt("HVD_AUTOTUNE") == 1;
  if (!autotune && !values.getString("HVD_AUTOTUNE_LOG").empty())
    throw InvalidArgument("--autotune-log-file (HVD_AUTOTUNE_LOG=" +
                          values.getString("HVD_AUTOTUNE_LOG") +
                          ") needs --autotune (HVD_AUTOTUNE=1)");
  if (autotune && values.isSet("HVD_FUSION_THRESHOLD") && values.isSet("HVD_CYCLE_TIME"))
    throw InvalidArgument("--autotune tunes the fusion threshold and the cycle time, but both "
                          "are given (--fusion-threshold-mb/HVD_FUSION_THRESHOLD and "
                          "--cycle-time-ms/HVD_CYCLE_TIME), which fixes them: leave one out");
  if (values.getInt("HVD_TIMELINE_MARK_CYCLES") == 1 && values.getString("HVD_TIMELINE").empty())
    throw InvalidArgument("--timeline-mark-cycles (HVD_TIMELINE_MARK_CYCLES=1) needs a timeline "
                          "(--timeline-filename, HVD_TIMELINE)");
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
  checkCombinations(out);
  return out;
}

}  // namespace hvd::launcher
