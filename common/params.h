// Values of hvd's configuration parameters (the table in common/param_table.h declares them):
// the runtime and the launcher read values only through ParamValues, and this file's .cc is the
// only place that reads the environment.
// Thread-safety: everything here is immutable after construction.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/param_table.h"

namespace hvd::params {

enum class Source { Default, Environment };

// Parsed, validated values. Unknown HVD_* names in the environment are ignored here (the
// launcher may pass extra ones); malformed values throw InvalidArgument naming the variable.
class ParamValues {
 public:
  static ParamValues fromEnvironment();
  static ParamValues fromMap(const std::map<std::string, std::string>& env);

  int64_t getInt(ParamId id) const;
  double getDouble(ParamId id) const;
  const std::string& getString(ParamId id) const;
  bool isSet(ParamId id) const;  // set explicitly (not from the default)
  Source source(ParamId id) const;
  // By variable name (tests, messages); throws InternalError for a name not in the table.
  int64_t getInt(const std::string& name) const { return getInt(spec(name).id); }
  double getDouble(const std::string& name) const { return getDouble(spec(name).id); }
  std::string getString(const std::string& name) const { return getString(spec(name).id); }
  bool isSet(const std::string& name) const { return isSet(spec(name).id); }
  Source source(const std::string& name) const { return source(spec(name).id); }

 private:
  struct Value {
    std::string text;
    int64_t number = 0;
    double real = 0.0;
    Source source = Source::Default;
  };
  std::vector<Value> values_;  // by ParamId
};

// The whole process environment as NAME -> value. This is the only function in hvd that reads
// the environment; everything else takes the map (the launcher forwards it to workers).
std::map<std::string, std::string> environmentSnapshot();

// Checks combinations of values that are each valid alone but make no sense together (a log file
// for autotune without autotune, ...). Throws InvalidArgument naming the variables and hvdrun's
// flags for them. hvdrun calls it before any worker starts; every worker's Config again.
void checkCombinations(const ParamValues& values);

// Parses a decimal integer strictly (the whole text, no trailing junk) and checks the range;
// `what` names the variable or flag in the error.
int64_t parseInt(const std::string& text, int64_t min, int64_t max, const std::string& what);
double parseDouble(const std::string& text, double min, double max, const std::string& what);

}  // namespace hvd::params
