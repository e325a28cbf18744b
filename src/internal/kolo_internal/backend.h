// kolo's internal interface for its own tools: the collective backends
// (Backend, BackendOptions, the factory of collectives/backend_factory.h),
// which kolo-bench drives
// directly to measure an engine without the runtime above it.
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_BACKEND_H_
#define KOLO_INTERNAL_BACKEND_H_

#include "collectives/backend.h"
#include "collectives/backend_factory.h"

#endif  // KOLO_INTERNAL_BACKEND_H_
