// ShmSegments: one POSIX shared-memory segment per rank, mapped by every
// rank of the group. The life cycle that both shm users (ShmGroup and the
// shm PeerLink) share:
//
//   1. Rank 0 draws a base name new for every group,
//      /kolo-<rank 0's pid>-<random>, and publishes it in the store.
//   2. Every rank creates its own segment, <base><tag><rank>, exclusively,
//      sizes it with ftruncate (zeroed; sparse unless `populate`) and maps
//      it. From here on the name is unlinked whatever happens.
//   (Create does 1 and 2. The caller then writes its header into own().)
//   3. MapPeers publishes that the rank's segment is ready, waits for every
//      rank's, and maps every peer's.
//   4. It then counts the ranks that mapped everything and, once all have,
//      unlinks the rank's own name: the segments live exactly as long as
//      the mappings, and nothing is left in /dev/shm however the job ends,
//      SIGKILL included.
//
// Store keys (under `key_prefix`): name, ready/<rank>, mapped, all_mapped.
// Thread-safety: setup is one thread's; the mappings are then read-only
// and stay valid until the object is destroyed.
#ifndef KOLO_TRANSPORT_SHM_SEGMENTS_H_
#define KOLO_TRANSPORT_SHM_SEGMENTS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "kolo/status.h"
#include "store/store.h"

namespace kolo {

class ShmSegments {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t size = 1;
    size_t bytes = 0;  // of every rank's segment
    std::chrono::milliseconds timeout = kDefaultTimeout;
    std::string key_prefix;  // of the store keys
    std::string name_tag;    // between the base name and the rank: "-"
    // Names the user in errors: "shm", "shm link of rank 3".
    std::string what = "shm";
    // Touch every page at creation, so that a full /dev/shm fails here with
    // an error rather than later with SIGBUS; otherwise pages cost memory
    // only once written.
    bool populate = false;
  };

  // Steps 1 and 2: collective over the ranks of `options`.
  static StatusOr<std::unique_ptr<ShmSegments>> Create(const Options& options,
                                                       Store& store);
  // Unlinks the own name if MapPeers did not, and unmaps every segment.
  ~ShmSegments();
  ShmSegments(const ShmSegments&) = delete;
  ShmSegments& operator=(const ShmSegments&) = delete;

  // Steps 3 and 4; the caller has written what peers read first into own().
  Status MapPeers(Store& store);

  void* own() const { return of(options_.rank); }
  // `rank`'s segment; nullptr for a peer until MapPeers has mapped it.
  void* of(int32_t rank) const { return mappings_[rank]; }
  // Every peer's segment is mapped (the last barrier may still fail).
  bool peers_mapped() const { return peers_mapped_; }
  size_t bytes() const { return options_.bytes; }

 private:
  ShmSegments(const Options& options, std::string base_name);
  std::string SegmentName(int32_t rank) const;
  Status SystemError(const std::string& name, const std::string& call,
                     int error) const;
  StatusOr<void*> Map(const std::string& name, int flags);
  void UnlinkOwn();

  const Options options_;
  const std::string base_name_;
  std::vector<void*> mappings_;  // indexed by rank
  bool own_linked_ = false;      // the own name still exists
  bool peers_mapped_ = false;
};

}  // namespace kolo

#endif  // KOLO_TRANSPORT_SHM_SEGMENTS_H_
