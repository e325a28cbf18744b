// kolo's internal interface for its own tools: an enum's names as one
// table read both ways (kolo-train's flag values). See
// kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_ENUM_NAMES_H_
#define KOLO_INTERNAL_ENUM_NAMES_H_

#include "common/enum_names.h"

#endif  // KOLO_INTERNAL_ENUM_NAMES_H_
