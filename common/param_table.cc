#include "common/param_table.h"

#include "common/error.h"
#include "common/handshake_listener.h"
#include "common/param_options.h"

namespace hvd::params {

const std::vector<ParamSpec>& allParams() {
  // The Config member is kept as text here (for --print-config and the docs); the runtime
  // expands the same rows with the member itself (runtime/config_fields.cc).
  // A row names only what it has; the members it leaves out keep their defaults (no flag, no
  // config key, ...), which is what -Wmissing-field-initializers would complain about.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  static const std::vector<ParamSpec> kParams = {
#define HVD_PARAM(Id, member, how, ...) \
  ParamSpec{.id = ParamId::Id, .configMember = #member, __VA_ARGS__},
#define HVD_LAUNCHER_PARAM(Id, ...) ParamSpec{.id = ParamId::Id, __VA_ARGS__},
#define HVD_OPTION(Id, Tag, type, member, how, ...) \
  ParamSpec{.id = ParamId::Id, .configMember = HVD_OPTION_MEMBER_NAME(Tag, member), __VA_ARGS__},
#include "common/param_rows.h"
#undef HVD_PARAM
#undef HVD_LAUNCHER_PARAM
#undef HVD_OPTION
  };
#pragma GCC diagnostic pop
  return kParams;
}

const ParamSpec& spec(ParamId id) {
  const auto& all = allParams();
  auto index = static_cast<std::size_t>(id);
  HVD_ENFORCE(index < all.size() && all[index].id == id, "parameter id ", index,
              " is not in the table");
  return all[index];
}

const ParamSpec& spec(const std::string& name) {
  for (const auto& p : allParams())
    if (p.name == name) return p;
  throw InternalError("unknown configuration parameter " + name);
}

}  // namespace hvd::params
