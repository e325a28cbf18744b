// Writing a file so that a reader sees either the old contents or the new,
// never half of the new: the bytes go to a temporary file of a unique name
// beside PATH (created with O_EXCL, so two writers never share one), are
// flushed to disk, and the temporary file is renamed over PATH, after which
// the directory entry is flushed too. A crash at any point leaves the
// previous file whole; of two concurrent writers, the last rename wins and
// the file holds its contents entire.
#ifndef KOLO_COMMON_ATOMIC_FILE_H_
#define KOLO_COMMON_ATOMIC_FILE_H_

#include <string>

#include "kolo/status.h"

namespace kolo {

// kInternal naming `path` and the failing system call. On any error the
// temporary file is removed and PATH is as it was.
Status WriteFileAtomically(const std::string& path,
                           const std::string& contents);

// The whole file; kNotFound or kInternal naming `path`.
StatusOr<std::string> ReadWholeFile(const std::string& path);

// For tests: called once the new contents are durable in `temporary` and
// before they are renamed over `path`, the point where a crash must leave
// the old file intact. nullptr (the default) calls nothing.
using BeforeRenameHook = void (*)(const std::string& temporary,
                                  const std::string& path);
void SetBeforeRenameHookForTesting(BeforeRenameHook hook);

}  // namespace kolo

#endif  // KOLO_COMMON_ATOMIC_FILE_H_
