// Config's members filled from the parameter table (common/param_table.h): each row names the
// member it fills and how its value becomes the member's type.
#pragma once

#include "common/params.h"
#include "runtime/config.h"

namespace hvd::runtime {

// Fills every member a row names, in the table's order; throws InvalidArgument naming the
// variable for a value the member cannot take (a process set naming a rank past HVD_SIZE, ...).
// Checks across parameters are Config::fromParams's.
void fillFromTable(Config& c, const params::ParamValues& v);

// Where `hvd-bench calibrate` keeps this host's network model, which jobs within one host use
// when HVD_NETWORK_MODEL is unset (Config::hostCalibrationPath): $XDG_CACHE_HOME/hvd/
// network_model-<host>.json ($HOME/.cache without XDG_CACHE_HOME). Empty where neither
// variable is set.
std::string machineNetworkModelPath();
// That file's model; InvalidArgument naming the file, and what to do, when it cannot be read.
collectives::NetworkModel loadHostCalibration(const std::string& path);

}  // namespace hvd::runtime
