// hvdrun's flags for the parameter table's rows (common/param_table.h): one CLI11 option for
// each row that declares a flag, in the help group the row names, with the row's help, choices
// and (for flags hvdrun acts on itself) range; and the horovodrun shortcuts (--tcp).
// Not thread-safe; lives as long as the CLI11 app it fills, which writes into it while parsing.
#pragma once

#include <deque>
#include <map>

#include "common/param_table.h"
#include "launcher/runtime_flags.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hvd::launcher {

class ParamFlags {
 public:
  // Adds the options; `groups` has the app or option group of every FlagGroup the rows name.
  void addTo(const std::map<params::FlagGroup, CLI::App*>& groups);
  // After parsing: the rows whose flag or shortcut was given, with the value as parsed.
  std::map<params::ParamId, FlagValue> given() const;

 private:
  // Where CLI11 stores one row's value; the deque keeps the addresses stable.
  struct Slot {
    const params::ParamSpec* spec = nullptr;
    long long integer = 0;
    double real = 0;
    std::string text;
    bool on = false;
    bool shortcutOn = false;
    CLI::Option* option = nullptr;
    CLI::Option* shortcut = nullptr;
  };
  void addOption(CLI::App& group, Slot& slot);
  std::deque<Slot> slots_;
};

}  // namespace hvd::launcher
