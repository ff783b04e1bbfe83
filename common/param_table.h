// The one table of hvd's parameters. Each row (common/param_rows_*.h) declares a parameter
// once: its HVD_* variable and Horovod's name for it, type, default, range, description, the
// hvdrun flag and config-file key that set it, and the runtime Config member it fills.
// Everything else is derived from the rows: ParamId, ParamValues' parsing (common/params.h),
// hvdrun's flags for them (launcher/param_flags.h), the config file (launcher/runtime_flags.h),
// Config::fromParams (runtime/config_fields.cc), --print-config and docs/environment.md
// (common/param_docs.h). scripts/check_param_table.py fails the build's tests when a variable's
// name is spelled in C++ anywhere else.
//
// The rows are X-macro calls, because the Config member lives in the runtime layer, which common
// may not see: each includer defines the macros and takes what it needs.
//   HVD_PARAM(Id, configMember, how, spec...)  a parameter the runtime reads into
//       Config::configMember; `how` names the conversion in runtime/config_fields.cc.
//   HVD_OPTION(Id, Tag, type, member, how, spec...)  a parameter the runtime reads into a
//       member of a component's options struct, which the row declares (common/param_options.h
//       maps the tag to the struct; param_option_members.h expands its members).
//   HVD_LAUNCHER_PARAM(Id, spec...)            a parameter only hvdrun reads.
//   spec... is ParamSpec's designated initializer from .name on.
// Thread-safety: the table is immutable after its first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hvd::params {

enum class ParamType { Int, Double, String };

// How a flag's or a config-file entry's value becomes the variable's text.
enum class ValueKind {
  None,           // no such flag or key
  Integer,        // a whole number, as is
  Number,         // a real number, as is
  Megabytes,      // a real number of MB, as bytes
  Text,           // a string, as is (checked against the parameter's choices, if any)
  LogLevel,       // a string, as log::canonicalLevel spells it
  Switch,         // true: 1, false: 0 (a flag given without its no- form: 1)
  NegatedSwitch,  // true: 0, false: 1 (config file's stall_check.enabled, ...)
};

// Who acts on a flag: the workers (hvdrun hands the variable on to them), or hvdrun itself (the
// flag fills a LaunchOptions field; hvdrun exports the variable where the workers need it).
enum class FlagTarget { Workers, Launcher };

// Where `hvdrun --help` lists a flag.
enum class FlagGroup { Main, Ssh, Elastic, Runtime };

struct FlagSpec {
  std::string_view names;  // CLI11's spelling: "--cache-capacity", "--x,!--no-x"; empty: none
  ValueKind kind = ValueKind::None;
  FlagTarget target = FlagTarget::Workers;
  FlagGroup group = FlagGroup::Runtime;
  std::string_view help;  // hvdrun --help adds the variable's name
};

// A horovodrun spelling that sets the parameter to one value (--tcp: --transport tcp).
struct FlagShortcut {
  std::string_view name;  // empty: none
  std::string_view value;
  std::string_view help;
};

// A key of the JSON config file (Horovod's YAML config sections), "section.key".
struct ConfigKeySpec {
  std::string_view key;  // empty: the file cannot set it
  ValueKind kind = ValueKind::None;
};

enum class ParamId {
#define HVD_PARAM(id, ...) id,
#define HVD_LAUNCHER_PARAM(id, ...) id,
#define HVD_OPTION(id, ...) id,
#include "common/param_rows.h"
#undef HVD_PARAM
#undef HVD_LAUNCHER_PARAM
#undef HVD_OPTION
};

struct ParamSpec {
  ParamId id;
  std::string_view configMember;  // the Config member it fills; empty: hvdrun reads it
  std::string name;               // HVD_...
  std::string horovodAlias;       // HOROVOD_... accepted as well, or empty
  ParamType type = ParamType::String;
  std::string defaultValue;          // as text; empty means "unset"
  int64_t min = 0;                   // for Int and Double
  int64_t max = INT64_MAX;           // for Int and Double
  std::vector<std::string> choices;  // for String: the accepted values; empty: any text
  bool secret = false;               // never printed
  std::string_view unsetMeans;       // what an empty default stands for, in the docs ("this host")
  FlagSpec flag;
  FlagShortcut shortcut;
  ConfigKeySpec configKey;
  std::string description;  // Markdown, as docs/environment.md shows it
};

// Every row, in ParamId order.
const std::vector<ParamSpec>& allParams();
const ParamSpec& spec(ParamId id);
const ParamSpec& spec(const std::string& name);  // throws InternalError for an unknown name
// The variable's name, for messages and for the environment hvdrun builds.
inline const std::string& envName(ParamId id) { return spec(id).name; }

}  // namespace hvd::params
