// The keys through which `kolorun --elastic` (the driver) and the workers
// of an elastic job talk, all in the store the driver hosts:
//
//   kolo/elastic/worker/<id>/beat   a counter each worker adds to every
//                                   heartbeat interval; the driver evicts a
//                                   worker whose counter stops
//   kolo/elastic/round/<k>          round k's members: worker ids in rank
//                                   order, "4,0,2" (set once, by the driver)
//   kolo/elastic/latest             the newest round's number
//   kolo/elastic/r<k>/broken        a counter a member adds to when round k
//                                   broke under it; when the driver saw
//                                   nobody die (a cut link, a timeout) it
//                                   publishes a new round of the same workers
//   kolo/elastic/r<k>/gate/arrivals every member adds 1 before it joins;
//                                   the one that makes it the round's size
//                                   opens the gate; the driver, replacing a
//                                   round that is still forming, adds
//                                   kGateClosed, so that nobody waits for a
//                                   member that will never come
//   kolo/elastic/r<k>/gate          "open", or why the round was abandoned
//   kolo/elastic/r<k>/...           round k's own rendezvous (kolo::Init's
//                                   keys), and its failure news,
//                                   r<k>/kolo/failed_ranks, which the driver
//                                   writes when it sees a member die
//
// Rounds only grow: a worker that left round k waits for round k+1 and
// skips to the newest one; a worker missing from the newest round has been
// removed and ends. Worker ids come from the driver (KOLO_ELASTIC_WORKER)
// and are never reused, so a restarted worker is a new member.
#ifndef KOLO_ELASTIC_PROTOCOL_H_
#define KOLO_ELASTIC_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::elastic {

inline constexpr const char* kLatestRoundKey = "kolo/elastic/latest";

inline std::string BeatKey(int64_t worker) {
  return "kolo/elastic/worker/" + std::to_string(worker) + "/beat";
}
inline std::string RoundMembersKey(int64_t round) {
  return "kolo/elastic/round/" + std::to_string(round);
}
inline std::string RoundPrefix(int64_t round) {
  return "kolo/elastic/r" + std::to_string(round);
}
inline std::string RoundBrokenKey(int64_t round) {
  return RoundPrefix(round) + "/broken";
}
inline std::string GateArrivalsKey(int64_t round) {
  return RoundPrefix(round) + "/gate/arrivals";
}
inline std::string GateKey(int64_t round) {
  return RoundPrefix(round) + "/gate";
}
inline constexpr const char* kGateOpen = "open";
// Added to a gate's arrivals to close it: larger than any round's size.
inline constexpr int64_t kGateClosed = int64_t{1} << 40;
// Where the driver writes the ranks of round k it saw die, in the form
// kolo::Init's failure news has (collectives/peer_failure.h).
inline std::string RoundFailureNewsKey(int64_t round) {
  return RoundPrefix(round) + "/kolo/failed_ranks";
}

// "4,0,2" <-> {4, 0, 2}; an error names the bad piece.
std::string FormatMembers(const std::vector<int64_t>& workers);
StatusOr<std::vector<int64_t>> ParseMembers(const std::string& text);

}  // namespace kolo::elastic

#endif  // KOLO_ELASTIC_PROTOCOL_H_
