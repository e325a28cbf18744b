// kolo's internal interface for its own tools: the job configuration.
//
// Tools (kolorun, kolo-bench, kolo-train) are built from this tree but are
// not part of kolo_core, and they need a few things the public API in
// include/kolo/ does not offer. They reach them only through the headers of
// kolo_internal/, which they get by linking the CMake target kolo_internal;
// none of these headers is installed, and none is a promise to users.
// tests/layering_check.py fails the build's tests when a tool includes a
// src/ header other than these.
//
// From here: ReadJobConfig and ProcessEnvironment (what the launcher said),
// ParseInt, ParseByteSize and ParseHostPortInto (flag values parsed the way
// the environment is, with the same error messages).
#ifndef KOLO_INTERNAL_CONFIG_H_
#define KOLO_INTERNAL_CONFIG_H_

#include "common/config.h"

#endif  // KOLO_INTERNAL_CONFIG_H_
