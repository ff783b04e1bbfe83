#include "common/error.h"

namespace hvd::detail {

void throwEnforce(const char* file, int line, const std::string& what) {
  throw InternalError(concat(what, " at ", file, ":", line));
}

}  // namespace hvd::detail
