#include "soak_plan.h"

#include <fmt/format.h>

#include <random>
#include <regex>
#include <sstream>

namespace kolo::bench {
namespace {

using nlohmann::json;

constexpr std::array<FaultKind, kFaultKinds> kAllFaults = {
    FaultKind::kKill, FaultKind::kStopContinue, FaultKind::kLinkDownUp,
    FaultKind::kGarbageStore, FaultKind::kGarbageEngine};

size_t Index(FaultKind kind) { return static_cast<size_t>(kind); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Lines with the indented lines that continue them joined on: kolorun
// lists what failed on each host under its verdict ("kolorun: the
// preflight failed; nothing was started:" then "    h3: no interface
// up ...").
std::vector<std::string> Messages(const std::string& text) {
  std::vector<std::string> messages;
  for (const std::string& line : Lines(text)) {
    const bool continues = !line.empty() && line[0] == ' ';
    if (continues && !messages.empty()) {
      messages.back() += " " + line.substr(line.find_first_not_of(' '));
    } else {
      messages.push_back(line);
    }
  }
  return messages;
}

const char* OutcomeName(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSucceeded: return "succeeded";
    case JobOutcome::kFailed: return "failed";
    case JobOutcome::kHung: return "hung";
  }
  return "?";
}

// One job kind's row of the table, summed over its runs.
struct JobRow {
  int64_t runs = 0, succeeded = 0, failed = 0, named = 0, hung = 0;
  int64_t recoveries = 0, steps_lost = 0, equal = 0;
};

JobRow RowOf(const std::vector<JobEnding>& jobs, const std::string& job) {
  JobRow row;
  for (const JobEnding& e : jobs) {
    if (e.job != job) continue;
    ++row.runs;
    row.succeeded += e.outcome == JobOutcome::kSucceeded ? 1 : 0;
    row.failed += e.outcome == JobOutcome::kFailed ? 1 : 0;
    row.named += e.outcome == JobOutcome::kFailed && !e.cause.empty() ? 1 : 0;
    row.hung += e.outcome == JobOutcome::kHung ? 1 : 0;
    row.recoveries += e.recoveries.rounds;
    row.steps_lost += e.recoveries.steps_lost;
    row.equal += e.parameters_equal ? 1 : 0;
  }
  return row;
}

}  // namespace

const char* FaultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill: return "kill -9";
    case FaultKind::kStopContinue: return "stop/cont";
    case FaultKind::kLinkDownUp: return "link down/up";
    case FaultKind::kGarbageStore: return "garbage store";
    case FaultKind::kGarbageEngine: return "garbage engine";
  }
  return "?";
}

const char* FaultKey(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill: return "kill";
    case FaultKind::kStopContinue: return "stop_cont";
    case FaultKind::kLinkDownUp: return "link_down_up";
    case FaultKind::kGarbageStore: return "garbage_store";
    case FaultKind::kGarbageEngine: return "garbage_engine";
  }
  return "?";
}

std::vector<PlannedFault> PlanFaults(uint64_t seed, double seconds,
                                     double mean_gap) {
  std::mt19937_64 random(seed);
  std::exponential_distribution<double> gap(1.0 / mean_gap);
  std::uniform_int_distribution<int> kind(0, kFaultKinds - 1);
  std::uniform_real_distribution<double> duration(1.0, 8.0);
  std::vector<PlannedFault> faults;
  for (double at = gap(random); at < seconds; at += gap(random)) {
    PlannedFault fault;
    fault.at_seconds = at;
    fault.kind = kAllFaults[kind(random)];
    fault.pick = random();
    fault.duration = duration(random);
    fault.bytes_seed = random();
    faults.push_back(fault);
  }
  return faults;
}

std::string GarbageBytes(uint64_t seed, size_t count) {
  std::mt19937_64 random(seed);
  std::string bytes(count, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random() & 0xff);
  // A third of the connections open like a frame whose length field is
  // absurd: every parser must check it before it allocates or copies.
  switch (seed % 3) {
    case 0:
      for (size_t i = 0; i < std::min<size_t>(count, 16); ++i)
        bytes[i] = static_cast<char>(0xff);
      break;
    case 1:
      for (size_t i = 0; i < std::min<size_t>(count, 8); ++i)
        bytes[i] = static_cast<char>(i == 7 ? 0x7f : 0xff);
      break;
    default: break;
  }
  return bytes;
}

Recoveries ReadRecoveries(const std::string& output) {
  static const std::regex kReset(
      R"(kolo-train: reset \d+: .*\(reached \d+, lost (\d+)\))");
  Recoveries r;
  for (const std::string& line : Lines(output)) {
    std::smatch match;
    if (!std::regex_search(line, match, kReset)) continue;
    ++r.rounds;
    r.steps_lost += std::stoll(match[1].str());
  }
  return r;
}

std::string NamedCause(const std::string& output,
                       const std::vector<std::string>& hosts) {
  static const std::regex kNamesPeer(R"((rank|worker) \d+)");
  static const std::regex kSaysFailure(
      R"(killed|exited|gone|lost|sent nothing|heartbeat|timed out|timeout|)"
      R"(failed|cannot|could not|refused|closed|unreachable|error|fewer)");
  // kolo's warnings (a refused garbage connection, say) are what it
  // survived, not why the job ended.
  static const std::regex kNotice(R"(kolo (rank \d+ )?(warning|info):)");
  const auto names = [&](const std::string& line) {
    if (std::regex_search(line, kNotice)) return false;
    if (!std::regex_search(line, kSaysFailure)) return false;
    if (std::regex_search(line, kNamesPeer)) return true;
    for (const std::string& host : hosts)
      if (line.find(host) != std::string::npos) return true;
    return false;
  };
  // kolorun's verdict on a worker that died or froze names the culprit;
  // next best is what a worker said of its peer (kolorun's other lines
  // then name only the worker that reported it).
  const std::vector<std::pair<const char*, const char*>> tiers = {
      {"kolorun:", "signal"},
      {"kolorun:", "heartbeat"},
      {"<stderr>:", ""},
      {"kolorun:", ""}};
  const std::vector<std::string> lines = Messages(output);
  for (const auto& [marker, word] : tiers) {
    for (const std::string& line : lines) {
      if (line.find(marker) != std::string::npos &&
          line.find(word) != std::string::npos && names(line))
        return line;
    }
  }
  return "";
}

JobEnding ReadJobEnding(const std::string& job, int64_t generation,
                        double seconds, int exit_code, bool hung,
                        bool wrote_report, const std::string& output,
                        const std::vector<std::string>& hosts) {
  JobEnding e;
  e.job = job;
  e.generation = generation;
  e.seconds = seconds;
  e.exit_code = exit_code;
  e.recoveries = ReadRecoveries(output);
  if (hung) {
    e.outcome = JobOutcome::kHung;
  } else if (exit_code != 0) {
    e.outcome = JobOutcome::kFailed;
    e.cause = NamedCause(output, hosts);
  } else {
    e.outcome = JobOutcome::kSucceeded;
    // kolo-train checks every rank's parameter checksum against rank 0's
    // at its end and fails the run on a difference; what shows it passed:
    // the static trainer's line, the elastic report written after it.
    e.parameters_equal = wrote_report && (job == "elastic" ||
                                          output.find("(equal on all ranks)") !=
                                              std::string::npos);
  }
  return e;
}

void SoakTally::RecordFault(FaultKind kind, bool injected) {
  (injected ? injected_ : skipped_)[Index(kind)]++;
}

void SoakTally::RecordJob(const JobEnding& ending) { jobs_.push_back(ending); }

int64_t SoakTally::injected(FaultKind kind) const {
  return injected_[Index(kind)];
}

int64_t SoakTally::skipped(FaultKind kind) const {
  return skipped_[Index(kind)];
}

int64_t SoakTally::injected_total() const {
  int64_t total = 0;
  for (int64_t n : injected_) total += n;
  return total;
}

int64_t SoakTally::hangs() const {
  int64_t n = 0;
  for (const JobEnding& e : jobs_) n += e.outcome == JobOutcome::kHung ? 1 : 0;
  return n;
}

int64_t SoakTally::unnamed_failures() const {
  int64_t n = 0;
  for (const JobEnding& e : jobs_)
    n += e.outcome == JobOutcome::kFailed && e.cause.empty() ? 1 : 0;
  return n;
}

std::vector<std::string> SoakTally::Problems() const {
  std::vector<std::string> problems;
  for (const JobEnding& e : jobs_) {
    const std::string name = fmt::format("{} job {}", e.job, e.generation);
    if (e.outcome == JobOutcome::kHung) {
      problems.push_back(name + " hung: still running at --job-timeout");
    } else if (e.outcome == JobOutcome::kFailed && e.cause.empty()) {
      problems.push_back(fmt::format(
          "{} failed (exit {}) without naming a rank, worker or host", name,
          e.exit_code));
    } else if (e.outcome == JobOutcome::kSucceeded && !e.parameters_equal) {
      problems.push_back(name +
                         " succeeded without showing its parameters equal on "
                         "every rank");
    }
  }
  const Leftovers& l = leftovers_;
  if (l.total() > 0) {
    problems.push_back(
        fmt::format("left behind: {} processes, {} namespaces, {} shm segments",
                    l.processes, l.namespaces, l.shm_segments));
  }
  return problems;
}

std::vector<std::string> SoakTally::TableLines() const {
  std::vector<std::string> lines = {
      fmt::format("{:<16} {:>8} {:>8}", "fault", "injected", "skipped")};
  for (FaultKind kind : kAllFaults) {
    lines.push_back(fmt::format("{:<16} {:>8} {:>8}", FaultName(kind),
                                injected(kind), skipped(kind)));
  }
  lines.push_back("");
  lines.push_back(
      fmt::format("{:<8} {:>5} {:>9} {:>7} {:>6} {:>6} {:>10} {:>10} {:>12}",
                  "job", "runs", "succeeded", "failed", "named", "hangs",
                  "recoveries", "steps lost", "params equal"));
  for (const char* job : {"elastic", "static"}) {
    const JobRow r = RowOf(jobs_, job);
    lines.push_back(fmt::format(
        "{:<8} {:>5} {:>9} {:>7} {:>6} {:>6} {:>10} {:>10} {:>12}", job, r.runs,
        r.succeeded, r.failed, r.named, r.hung, r.recoveries, r.steps_lost,
        fmt::format("{}/{}", r.equal, r.succeeded)));
  }
  lines.push_back("");
  lines.push_back(fmt::format(
      "leftovers: {} processes, {} namespaces, {} shm segments",
      leftovers_.processes, leftovers_.namespaces, leftovers_.shm_segments));
  return lines;
}

json SoakTally::ToJson() const {
  json faults = json::object();
  for (FaultKind kind : kAllFaults) {
    faults[FaultKey(kind)] = {{"injected", injected(kind)},
                              {"skipped", skipped(kind)}};
  }
  json jobs = json::array();
  json totals = json::object();
  for (const char* job : {"elastic", "static"}) {
    const JobRow r = RowOf(jobs_, job);
    totals[job] = {{"runs", r.runs},
                   {"succeeded", r.succeeded},
                   {"failed", r.failed},
                   {"failed_named", r.named},
                   {"hangs", r.hung},
                   {"recoveries", r.recoveries},
                   {"steps_lost", r.steps_lost},
                   {"parameters_equal", r.equal}};
  }
  for (const JobEnding& e : jobs_) {
    jobs.push_back({{"job", e.job},
                    {"generation", e.generation},
                    {"seconds", e.seconds},
                    {"outcome", OutcomeName(e.outcome)},
                    {"exit_code", e.exit_code},
                    {"parameters_equal", e.parameters_equal},
                    {"cause", e.cause},
                    {"recoveries", e.recoveries.rounds},
                    {"steps_lost", e.recoveries.steps_lost},
                    {"faults", e.faults}});
  }
  return {{"faults", faults},
          {"faults_injected", injected_total()},
          {"totals", totals},
          {"hangs", hangs()},
          {"unnamed_failures", unnamed_failures()},
          {"leftovers",
           {{"processes", leftovers_.processes},
            {"namespaces", leftovers_.namespaces},
            {"shm_segments", leftovers_.shm_segments}}},
          {"jobs", jobs},
          {"problems", Problems()}};
}

}  // namespace kolo::bench
