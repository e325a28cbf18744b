#include "common/atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kolo {
namespace {

std::atomic<BeforeRenameHook> before_rename_hook{nullptr};

Status SystemError(const std::string& what, const std::string& path,
                   int error) {
  return Internal(what + " " + path + ": " + std::strerror(error));
}

// fsync() of a directory makes a rename inside it durable.
Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return SystemError("cannot open directory", dir, errno);
  const int rc = ::fsync(fd);
  Status status =
      rc == 0 ? Status::Ok() : SystemError("cannot sync", dir, errno);
  ::close(fd);
  return status;
}

std::string DirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Writes all of `contents` to `fd`, syncs and closes it (always, even on
// an error). close() can report a failed write-back (NFS, quotas), so its
// result counts like the others.
Status WriteSyncClose(int fd, const std::string& contents,
                      const std::string& temporary) {
  Status status;
  size_t written = 0;
  while (status.ok() && written < contents.size()) {
    const ssize_t n =
        ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = SystemError("cannot write", temporary, errno);
    if (n > 0) written += static_cast<size_t>(n);
  }
  // mkstemp makes the file 0600; a written file is as readable as before.
  if (status.ok() && ::fchmod(fd, 0644) != 0)
    status = SystemError("cannot set the mode of", temporary, errno);
  if (status.ok() && ::fsync(fd) != 0)
    status = SystemError("cannot sync", temporary, errno);
  if (::close(fd) != 0 && status.ok())
    status = SystemError("cannot close", temporary, errno);
  return status;
}

}  // namespace

void SetBeforeRenameHookForTesting(BeforeRenameHook hook) {
  before_rename_hook.store(hook);
}

Status WriteFileAtomically(const std::string& path,
                           const std::string& contents) {
  const std::string dir = DirectoryOf(path);
  // A hidden name of its own in PATH's directory (a rename does not cross
  // file systems), made with O_EXCL by mkostemp.
  const std::string pattern =
      dir + "/." + std::filesystem::path(path).filename().string() + ".XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    return SystemError("cannot create a temporary file to write", path, errno);
  }
  const std::string temporary = name.data();
  Status status = WriteSyncClose(fd, contents, temporary);
  if (status.ok()) {
    if (BeforeRenameHook hook = before_rename_hook.load())
      hook(temporary, path);
    if (std::rename(temporary.c_str(), path.c_str()) != 0)
      status = SystemError("cannot rename " + temporary + " to", path, errno);
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  return SyncDirectory(dir);
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return SystemError("cannot read", path, errno);
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return SystemError("cannot read", path, errno);
  return bytes.str();
}

}  // namespace kolo
