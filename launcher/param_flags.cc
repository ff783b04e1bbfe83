#include "launcher/param_flags.h"

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "common/logging.h"

namespace hvd::launcher {
namespace {

using params::FlagTarget;
using params::ParamSpec;
using params::ValueKind;

// The row's help and the variable it sets: "... (HVD_CACHE_CAPACITY, default 1024)".
std::string helpText(const ParamSpec& p) {
  std::string out = std::string(p.flag.help) + " (" + p.name;
  if (p.flag.kind == ValueKind::Switch) return out + "=1)";
  // A flag in MB would show the variable's default in bytes.
  if (!p.defaultValue.empty() && p.flag.kind != ValueKind::Megabytes)
    out += ", default " + p.defaultValue;
  return out + ")";
}

// --log-level takes Horovod's names too (WARNING, FATAL) and stores hvd's.
CLI::Validator logLevelNames() {
  return CLI::Validator(
      [](std::string& level) {
        try {
          level = log::canonicalLevel(level);
          return std::string();
        } catch (const InvalidArgument& e) {
          return std::string(e.what());
        }
      },
      "LEVEL");
}

}  // namespace

void ParamFlags::addOption(CLI::App& group, Slot& slot) {
  const ParamSpec& p = *slot.spec;
  const std::string names(p.flag.names);
  switch (p.flag.kind) {
    case ValueKind::Integer:
      slot.option = group.add_option(names, slot.integer, helpText(p));
      // hvdrun itself uses these before it checks what the workers get, so CLI11 checks them.
      if (p.flag.target == FlagTarget::Launcher) slot.option->check(CLI::Range(p.min, p.max));
      break;
    case ValueKind::Number:
    case ValueKind::Megabytes:
      slot.option = group.add_option(names, slot.real, helpText(p));
      break;
    case ValueKind::Text:
      slot.option = group.add_option(names, slot.text, helpText(p));
      if (!p.choices.empty()) slot.option->check(CLI::IsMember(p.choices));
      break;
    case ValueKind::LogLevel:
      slot.option = group.add_option(names, slot.text, helpText(p))->transform(logLevelNames());
      break;
    case ValueKind::Switch:
      slot.option = group.add_flag(names, slot.on, helpText(p));
      break;
    case ValueKind::None:
    case ValueKind::NegatedSwitch:
      throw InternalError(p.name + ": its flag has no command-line form");
  }
  if (!p.shortcut.name.empty())
    slot.shortcut =
        group.add_flag(std::string(p.shortcut.name), slot.shortcutOn, std::string(p.shortcut.help))
            ->excludes(slot.option);
}

void ParamFlags::addTo(const std::map<params::FlagGroup, CLI::App*>& groups) {
  for (const auto& p : params::allParams()) {
    if (p.flag.names.empty()) continue;
    auto group = groups.find(p.flag.group);
    HVD_ENFORCE(group != groups.end(), p.name, "'s flag names a help group hvdrun lacks");
    slots_.emplace_back().spec = &p;
    addOption(*group->second, slots_.back());
  }
}

std::map<params::ParamId, FlagValue> ParamFlags::given() const {
  std::map<params::ParamId, FlagValue> out;
  for (const Slot& s : slots_) {
    const params::ParamId id = s.spec->id;
    if (s.shortcutOn) out[id] = std::string(s.spec->shortcut.value);
    if (s.option->count() == 0) continue;
    switch (s.spec->flag.kind) {
      case ValueKind::Integer:
        out[id] = s.integer;
        break;
      case ValueKind::Number:
      case ValueKind::Megabytes:
        out[id] = s.real;
        break;
      case ValueKind::Switch:
        out[id] = s.on;
        break;
      default:
        out[id] = s.text;
        break;
    }
  }
  return out;
}

}  // namespace hvd::launcher
