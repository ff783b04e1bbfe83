/* Calls the C API with codes outside its enums, as a C program may: a C enum is an int. C++
   cannot make such a value without undefined behaviour, hence this file is C. */
#include "hvd/hvd.h"

hvd_status hvdTestAllreduceWithCodes(const void* in, void* out, size_t count, int dtype, int op) {
  return hvd_allreduce(in, out, count, (hvd_dtype)dtype, (hvd_reduce_op)op);
}
