// The arena of this process (metrics/arena.h), behind kolo/metrics.h.
//
// Created at its first use: in KOLO_METRICS_DIR when kolorun gave one (so
// that kolorun serves it), else in memory. It lives until the process
// exits, so the handles kolo/metrics.h gives out never dangle; the file
// outlives the process and kolorun removes its folder when the job ends.
#ifndef KOLO_METRICS_PROCESS_ARENA_H_
#define KOLO_METRICS_PROCESS_ARENA_H_

#include <cstdint>
#include <string>

#include "kolo/metrics.h"
#include "metrics/arena.h"

namespace kolo {
namespace metrics {

Arena& ProcessArena();

// What Init() learns: the rank the store settled on, and that the rank is
// running; Shutdown() marks it finished.
void SetProcessRank(int32_t rank);
void SetProcessPhase(RankPhase phase);

// Registers a series of kolo's own, whose names and labels are fixed in
// kolo's code: an error here is a bug, so it is a check.
Counter KoloCounter(const std::string& name, const std::string& help,
                    const Labels& labels = {});
Gauge KoloGauge(const std::string& name, const std::string& help,
                const Labels& labels = {});
Histogram KoloHistogram(const std::string& name, const std::string& help,
                        const Labels& labels = {});

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_PROCESS_ARENA_H_
