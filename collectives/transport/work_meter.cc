#include "collectives/transport/work_meter.h"

namespace hvd::collectives {
namespace {
thread_local WorkMeter* tMeter = nullptr;
}  // namespace

WorkMeter* workMeter() { return tMeter; }

ScopedWorkMeter::ScopedWorkMeter(WorkMeter* meter) : previous_(tMeter) { tMeter = meter; }
ScopedWorkMeter::~ScopedWorkMeter() { tMeter = previous_; }

}  // namespace hvd::collectives
