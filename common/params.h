// The one registry of hvd's configuration parameters: every HVD_* variable is declared here once,
// with its type, default, range and description. The runtime and the launcher read values only
// through ParamValues, and this file's .cc is the only place that reads the environment.
// Thread-safety: everything here is immutable after construction.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hvd::params {

enum class ParamType { Int, Double, String };

struct ParamSpec {
  ParamSpec(std::string name, std::string horovodAlias, ParamType type, std::string defaultValue,
            int64_t min, int64_t max, bool secret, std::string description,
            std::vector<std::string> choices = {})
      : name(std::move(name)), horovodAlias(std::move(horovodAlias)), type(type),
        defaultValue(std::move(defaultValue)), min(min), max(max), secret(secret),
        description(std::move(description)), choices(std::move(choices)) {}

  std::string name;           // HVD_...
  std::string horovodAlias;   // HOROVOD_... accepted as well, or empty
  ParamType type;
  std::string defaultValue;   // as text; empty means "unset"
  int64_t min = 0;            // for Int and Double
  int64_t max = INT64_MAX;    // for Int and Double
  bool secret = false;        // never printed
  std::string description;
  std::vector<std::string> choices;  // for String: the accepted values; empty: any text
};

const std::vector<ParamSpec>& allParams();
const ParamSpec& spec(const std::string& name);  // throws InternalError for an unknown name

enum class Source { Default, Environment };

// Parsed, validated values. Unknown HVD_* names in the environment are ignored here (the
// launcher may pass extra ones); malformed values throw InvalidArgument naming the variable.
class ParamValues {
 public:
  static ParamValues fromEnvironment();
  static ParamValues fromMap(const std::map<std::string, std::string>& env);

  int64_t getInt(const std::string& name) const;
  double getDouble(const std::string& name) const;
  std::string getString(const std::string& name) const;
  bool isSet(const std::string& name) const;  // set explicitly (not from the default)
  Source source(const std::string& name) const;

 private:
  struct Value {
    std::string text;
    int64_t number = 0;
    double real = 0.0;
    Source source = Source::Default;
  };
  std::map<std::string, Value> values_;
};

// The whole process environment as NAME -> value. This is the only function in hvd that reads
// the environment; everything else takes the map (the launcher forwards it to workers).
std::map<std::string, std::string> environmentSnapshot();

// Checks combinations of values that are each valid alone but make no sense together (a log file
// for autotune without autotune, ...). Throws InvalidArgument naming the variables and hvdrun's
// flags for them. hvdrun calls it before any worker starts; every worker's Config again.
void checkCombinations(const ParamValues& values);

// One line per parameter: name, Horovod alias, type, default, range, description, and the
// value the environment gives it now (secret values are shown as "(set)", never printed).
std::string describeAll(const ParamValues& current);

// Parses a decimal integer strictly (the whole text, no trailing junk) and checks the range;
// `what` names the variable or flag in the error.
int64_t parseInt(const std::string& text, int64_t min, int64_t max, const std::string& what);
double parseDouble(const std::string& text, double min, double max, const std::string& what);

}  // namespace hvd::params
