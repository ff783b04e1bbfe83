// Expands, inside an options struct, to one member per HVD_OPTION row tagged with that struct
// (common/param_options.h). The includer defines HVD_OPTION_MEMBERS_OF_<Tag>(type, member) for
// its own tag; the rows of the other tags expand to nothing. Members start value-initialised:
// their defaults are the table's, which Config::fromParams applies. Included once per struct,
// so it has no include guard.
#ifndef HVD_OPTION_MEMBERS_OF_Engine
#define HVD_OPTION_MEMBERS_OF_Engine(type, member)
#endif
#ifndef HVD_OPTION_MEMBERS_OF_Coordinator
#define HVD_OPTION_MEMBERS_OF_Coordinator(type, member)
#endif
#ifndef HVD_OPTION_MEMBERS_OF_Executor
#define HVD_OPTION_MEMBERS_OF_Executor(type, member)
#endif
#ifndef HVD_OPTION_MEMBERS_OF_Autotune
#define HVD_OPTION_MEMBERS_OF_Autotune(type, member)
#endif
#define HVD_PARAM(...)
#define HVD_LAUNCHER_PARAM(...)
#define HVD_OPTION(Id, Struct, type, member, ...) HVD_OPTION_MEMBERS_OF_##Struct(type, member)
#include "common/param_rows.h"
#undef HVD_PARAM
#undef HVD_LAUNCHER_PARAM
#undef HVD_OPTION
#undef HVD_OPTION_MEMBERS_OF_Engine
#undef HVD_OPTION_MEMBERS_OF_Coordinator
#undef HVD_OPTION_MEMBERS_OF_Executor
#undef HVD_OPTION_MEMBERS_OF_Autotune
