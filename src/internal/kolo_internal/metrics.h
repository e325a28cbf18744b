// kolo's internal interface for its own tools: the metrics endpoint. kolorun
// serves the metrics of the ranks it starts (metrics/exporter.h), which
// keep them in files it reads (metrics/arena.h).
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_METRICS_H_
#define KOLO_INTERNAL_METRICS_H_

#include "metrics/arena.h"
#include "metrics/exporter.h"

#endif  // KOLO_INTERNAL_METRICS_H_
