// What the launcher needs of the shared-memory transport: the names of a job's segments, their
// clean-up, and the room a job takes in /dev/shm. The launcher includes this header only, never
// the segment layout (shm_segment.h). Implemented in shm_segment.cc.
#pragma once

#include <cstddef>
#include <string>

namespace hvd::collectives::shm {

// What a job of `localRanks` ranks on one host takes in /dev/shm: each rank's segments for the
// data and the control communicator.
std::size_t jobBytesOnHost(int localRanks, std::size_t ringBytes);

// The name prefix of a job's segments ("hvd-<job id>"). A rank killed between creating its
// segment and unlinking it (a job stopped during init) leaves the name behind; the launcher
// removes what is left under its job's prefix when the job ends (removeSegments).
std::string jobSegmentPrefix(const std::string& jobId);
// Unlinks every /dev/shm name that starts with "<prefix>-"; returns how many.
int removeSegments(const std::string& prefix);

}  // namespace hvd::collectives::shm
