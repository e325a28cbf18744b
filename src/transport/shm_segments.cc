#include "transport/shm_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

namespace kolo {

ShmSegments::ShmSegments(const Options& options, std::string base_name)
    : options_(options),
      base_name_(std::move(base_name)),
      mappings_(static_cast<size_t>(options.size), nullptr) {}

ShmSegments::~ShmSegments() {
  UnlinkOwn();
  for (void* base : mappings_) {
    if (base != nullptr) munmap(base, options_.bytes);
  }
}

StatusOr<std::unique_ptr<ShmSegments>> ShmSegments::Create(
    const Options& options, Store& store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size ||
      options.bytes == 0) {
    return InvalidArgument(options.what + ": rank " +
                           std::to_string(options.rank) + " of " +
                           std::to_string(options.size) + " with segments of " +
                           std::to_string(options.bytes) + " bytes");
  }
  // Rank 0 names the group's segments; the name is new for every group.
  const std::string name_key = options.key_prefix + "name";
  std::string base;
  if (options.rank == 0) {
    std::random_device random;
    std::ostringstream name;
    name << "/kolo-" << getpid() << "-" << std::hex << random() << random();
    base = name.str();
    KOLO_RETURN_IF_ERROR(store.Set(name_key, base));
  } else {
    StatusOr<std::string> name = store.Get(name_key, options.timeout);
    if (!name.ok()) {
      return name.status().WithContext(options.what +
                                       ": waiting for rank 0's segment name");
    }
    base = *std::move(name);
  }
  std::unique_ptr<ShmSegments> segments(new ShmSegments(options, base));
  KOLO_ASSIGN_OR_RETURN(
      segments->mappings_[options.rank],
      segments->Map(segments->SegmentName(options.rank), O_CREAT | O_EXCL));
  // Touch every page now: a full /dev/shm fails here, not with SIGBUS.
  if (options.populate) std::memset(segments->own(), 0, options.bytes);
  return segments;
}

std::string ShmSegments::SegmentName(int32_t rank) const {
  return base_name_ + options_.name_tag + std::to_string(rank);
}

Status ShmSegments::SystemError(const std::string& name,
                                const std::string& call, int error) const {
  return Internal(options_.what + ": " + call + " of /dev/shm" + name +
                  " failed: " + std::strerror(error));
}

StatusOr<void*> ShmSegments::Map(const std::string& name, int flags) {
  const bool create = (flags & O_CREAT) != 0;
  const int fd = shm_open(name.c_str(), flags | O_RDWR, 0600);
  if (fd < 0) return SystemError(name, "shm_open", errno);
  // From here on the own name must go whatever happens (UnlinkOwn).
  if (create) own_linked_ = true;
  // ftruncate zeroes without touching pages.
  if (create && ftruncate(fd, static_cast<off_t>(options_.bytes)) != 0) {
    const int error = errno;
    close(fd);
    return SystemError(
        name, "ftruncate to " + std::to_string(options_.bytes) + " bytes",
        error);
  }
  void* base =
      mmap(nullptr, options_.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_error = errno;
  close(fd);
  if (base == MAP_FAILED) return SystemError(name, "mmap", map_error);
  return base;
}

Status ShmSegments::MapPeers(Store& store) {
  const std::string& prefix = options_.key_prefix;
  KOLO_RETURN_IF_ERROR(
      store.Set(prefix + "ready/" + std::to_string(options_.rank), "1"));
  std::vector<std::string> keys;
  for (int32_t r = 0; r < options_.size; ++r) {
    keys.push_back(prefix + "ready/" + std::to_string(r));
  }
  KOLO_RETURN_IF_ERROR(
      store.Wait(keys, options_.timeout)
          .WithContext(options_.what + ": waiting for every rank's segment"));
  for (int32_t r = 0; r < options_.size; ++r) {
    if (r == options_.rank) continue;
    KOLO_ASSIGN_OR_RETURN(mappings_[r], Map(SegmentName(r), 0));
  }
  peers_mapped_ = true;
  // Everyone has mapped everything: the names can go.
  KOLO_ASSIGN_OR_RETURN(int64_t mapped, store.Add(prefix + "mapped", 1));
  if (mapped == options_.size)
    KOLO_RETURN_IF_ERROR(store.Set(prefix + "all_mapped", "1"));
  Status all = store.Wait({prefix + "all_mapped"}, options_.timeout)
                   .WithContext(options_.what +
                                ": waiting for every rank to map the segments");
  UnlinkOwn();
  return all;
}

void ShmSegments::UnlinkOwn() {
  if (!own_linked_) return;
  shm_unlink(SegmentName(options_.rank).c_str());
  own_linked_ = false;
}

}  // namespace kolo
