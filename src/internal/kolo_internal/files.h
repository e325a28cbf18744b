// kolo's internal interface for its own tools: files written whole or not
// at all (temporary file, fsync, rename, directory fsync), for what a user
// saves with them: kolo-train's checkpoints, kolo-bench's JSON and reports.
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_FILES_H_
#define KOLO_INTERNAL_FILES_H_

#include "common/atomic_file.h"

#endif  // KOLO_INTERNAL_FILES_H_
