// Writing a file so that a reader sees either the old contents or the new,
// never half of the new: the bytes go to PATH.tmp, are flushed to disk, and
// the temporary file is renamed over PATH, after which the directory entry
// is flushed too. A crash at any point leaves the previous file whole.
#ifndef KOLO_COMMON_ATOMIC_FILE_H_
#define KOLO_COMMON_ATOMIC_FILE_H_

#include <string>

#include "kolo/status.h"

namespace kolo {

// kInternal naming `path` and the failing system call.
Status WriteFileAtomically(const std::string& path,
                           const std::string& contents);

// The whole file; kNotFound or kInternal naming `path`.
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace kolo

#endif  // KOLO_COMMON_ATOMIC_FILE_H_
