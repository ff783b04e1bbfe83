// Barrier over a Comm: returns on each rank only after every rank has entered it.
#pragma once

#include "collectives/transport/comm.h"

namespace hvd::collectives {

void barrier(Comm& comm);

}  // namespace hvd::collectives
