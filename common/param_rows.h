// Every row of the parameter table (common/param_table.h explains the HVD_PARAM and
// HVD_LAUNCHER_PARAM calls), in the order --print-config and docs/environment.md list them.
// Included once per expansion, so it has no include guard. Split by subject only to keep each
// file short.
// clang-format off
#include "common/param_rows_job.h"
#include "common/param_rows_transport.h"
#include "common/param_rows_engine.h"
// clang-format on
