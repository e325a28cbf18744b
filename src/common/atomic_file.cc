#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kolo {
namespace {

Status SystemError(const std::string& what, const std::string& path) {
  return Internal(what + " " + path + ": " + std::strerror(errno));
}

// fsync() of a directory makes a rename inside it durable.
Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return SystemError("cannot open directory", dir);
  const int rc = ::fsync(fd);
  Status status = rc == 0 ? Status::Ok() : SystemError("cannot sync", dir);
  ::close(fd);
  return status;
}

}  // namespace

Status WriteFileAtomically(const std::string& path,
                           const std::string& contents) {
  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SystemError("cannot create", tmp);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n =
        ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status error = SystemError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status error = SystemError("cannot sync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return error;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status error = SystemError("cannot rename " + tmp + " to", path);
    ::unlink(tmp.c_str());
    return error;
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return SyncDirectory(dir);
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return SystemError("cannot read", path);
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return SystemError("cannot read", path);
  return bytes.str();
}

}  // namespace kolo
