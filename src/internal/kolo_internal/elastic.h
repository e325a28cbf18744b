// kolo's internal interface for its own tools: the keys of the elastic
// protocol, which kolorun --elastic writes and reads as its driver.
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_ELASTIC_H_
#define KOLO_INTERNAL_ELASTIC_H_

#include "elastic/protocol.h"

#endif  // KOLO_INTERNAL_ELASTIC_H_
