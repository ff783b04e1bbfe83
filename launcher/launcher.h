// hvdrun's work after CLI parsing: validate, place ranks, serve the rendezvous, run the job.
#pragma once

#include "launcher/launch_options.h"

namespace hvd::launcher {

// Returns hvdrun's exit code. Throws InvalidArgument for bad input, before anything starts.
int launch(const LaunchOptions& options);

}  // namespace hvd::launcher
