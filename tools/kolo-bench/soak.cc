#include "soak.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "job_runner.h"
#include "scratch_dir.h"
#include "sibling_tools.h"
#include "soak_cluster.h"
#include "soak_plan.h"
#include "train.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kHosts = 3;
// The drivers run here; its link is never cut, so that a cut costs the
// jobs their workers, not their stores.
constexpr size_t kDriverHost = 0;
// How long a garbage-engine fault waits for a worker's engine to listen.
constexpr double kEngineWaitSeconds = 45;
// How long a new static worker is held stopped so that its peer's engine
// listens for it; under the static job's --timeout 5.
constexpr std::chrono::seconds kEngineHold(3);
constexpr std::chrono::seconds kRestartPause(2);
constexpr size_t kElastic = 0, kStatic = 1;
constexpr const char* kJobNames[] = {"elastic", "static"};

// Set by SIGINT and SIGTERM: the soak stops its faults and its jobs and
// still cleans up. A signal handler can only reach a global.
volatile sig_atomic_t interrupted = 0;
extern "C" void OnInterrupt(int) { interrupted = 1; }

// A job the soak started: its kolorun, in h1, leads a process group.
struct SoakJob {
  size_t kind = kElastic;
  int64_t generation = 0;
  pid_t pid = -1;
  Clock::time_point start;
  std::string log;
  std::string json_path;
  int64_t faults = 0;
};

// A fault still to be undone: a worker to continue, a link to set up.
struct Undo {
  Clock::time_point due;
  FaultKind kind = FaultKind::kStopContinue;
  pid_t pid = -1;
  size_t host = 0;
};

// kolo-train's flags for either job.
std::vector<std::string> TrainArgs(const SoakFlags& f,
                                   const std::string& kolo_train, bool elastic,
                                   const std::string& json_path) {
  std::vector<std::string> c = {kolo_train, "--threads", "1",      "--model",
                                f.model,    "--dataset", f.dataset};
  if (elastic) c.push_back("--elastic");
  if (!f.data_dir.empty()) c.insert(c.end(), {"--data-dir", f.data_dir});
  for (auto [flag, value] :
       {std::pair<const char*, int64_t>{"--epochs", f.epochs},
        {"--batch-size", f.batch_size},
        {"--train-subset", f.train_subset},
        {"--test-subset", f.test_subset}}) {
    c.insert(c.end(), {flag, std::to_string(value)});
  }
  if (elastic)
    c.insert(c.end(), {"--commit-every", std::to_string(f.commit_every)});
  c.insert(c.end(), {"--json", json_path});
  return c;
}

// kolorun's command for a job of `kind` on `hosts` (h1 first).
std::vector<std::string> JobCommand(const SoakFlags& f, const TrainTools& tools,
                                    const std::vector<std::string>& hosts,
                                    size_t kind, const std::string& json_path) {
  std::vector<std::string> c = {tools.kolorun};
  if (kind == kElastic) {
    // Every host has a slot, so a dead worker's replacement can start
    // elsewhere; a blacklisted host comes back soon, since the soak kills
    // often; the reset limit is the soak's to test, not to hit.
    const std::string np = std::to_string(f.np);
    c.insert(c.end(),
             {"--elastic", "-np", np, "--min-np", "1", "--max-np", np, "-H",
              fmt::format("{}:1,{}:1,{}:1", hosts[0], hosts[1], hosts[2]),
              "--heartbeat-timeout", "3", "--blacklist-cooldown", "10",
              "--reset-limit", "1000", "--elastic-timeout", "60", "--timeout",
              "10"});
  } else {
    c.insert(c.end(), {"-H", fmt::format("{}:1,{}:1", hosts[1], hosts[2]),
                       "--timeout", "5", "--start-timeout", "15"});
  }
  c.insert(c.end(), {"--remote-shell", "ip netns exec {host}"});
  const std::vector<std::string> train =
      TrainArgs(f, tools.kolo_train, kind == kElastic, json_path);
  c.insert(c.end(), train.begin(), train.end());
  return c;
}

// Starts `command` in `host` (ip netns exec) as the leader of a process
// group of its own, its output in `log`.
StatusOr<pid_t> StartInHost(const std::string& host,
                            const std::vector<std::string>& command,
                            const std::string& log) {
  std::vector<std::string> words = {"ip", "netns", "exec", host};
  words.insert(words.end(), command.begin(), command.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Internal("fork failed starting a job in " + host);
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execvp("ip", argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The soak's loop: keeps both jobs running, injects the planned faults,
// undoes them when due, records every job's end.
class Soak {
 public:
  Soak(const SoakFlags& f, const TrainTools& tools, SoakCluster& cluster,
       const ScratchDir& scratch, std::vector<PlannedFault> plan)
      : f_(f),
        tools_(tools),
        cluster_(cluster),
        scratch_(scratch),
        plan_(std::move(plan)),
        start_(Clock::now()),
        kolorun_exe_(fs::weakly_canonical(tools.kolorun)),
        kolo_train_exe_(fs::weakly_canonical(tools.kolo_train)) {}

  // Until --seconds have passed (or a signal came) and both jobs ended.
  void Run();
  // What the jobs left: processes in the hosts, then (after the
  // cluster's Down) namespaces, processes seen during the soak still
  // alive, their shm segments.
  Leftovers CountLeftovers();
  SoakTally& tally() { return tally_; }

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }
  template <typename... Args>
  void Say(fmt::format_string<Args...> format, Args&&... args) {
    fmt::print("[{:7.1f} s] {}\n", Elapsed(),
               fmt::format(format, std::forward<Args>(args)...));
    std::fflush(stdout);
  }

  void Observe();
  void TendJob(size_t kind, bool soaking);
  void StartJob(size_t kind);
  void EndJob(size_t kind, int exit_code, bool hung);
  void Inject(const PlannedFault& fault);
  bool SignalWorker(const PlannedFault& fault);
  bool CutLink(const PlannedFault& fault);
  bool GarbageToStore(const PlannedFault& fault);
  void TendEngineFault(bool soaking);
  bool GarbageToEngine(const PlannedFault& fault);
  void HoldNewStaticJob();
  void LetRankZeroListen();
  void EndEngineFault(bool injected, const char* why);
  void UndoDue(bool all);
  // Where a garbage fault against `target` connects from.
  size_t SourceHost(size_t target, uint64_t pick) const;
  // The kolo-train processes of `job` (every job's when null).
  std::vector<ClusterProcess> Workers(const SoakJob* job) const;
  SoakJob* JobOf(const ClusterProcess& worker);

  const SoakFlags& f_;
  const TrainTools& tools_;
  SoakCluster& cluster_;
  const ScratchDir& scratch_;
  const std::vector<PlannedFault> plan_;
  const Clock::time_point start_;
  // What /proc/PID/exe shows for the jobs' programs.
  const fs::path kolorun_exe_;
  const fs::path kolo_train_exe_;
  size_t next_fault_ = 0;
  std::optional<SoakJob> jobs_[2];
  int64_t generations_[2] = {0, 0};
  Clock::time_point restart_at_[2];
  std::vector<Undo> undos_;
  std::optional<PlannedFault> engine_fault_;  // waiting for a listener
  Clock::time_point engine_wait_end_;
  std::set<pid_t> engine_old_workers_;  // workers when it was planned
  // The new static job's ranks 0 and 1 while the fault holds them.
  pid_t engine_ranks_[2] = {-1, -1};
  bool engine_listening_ = false;  // rank 1 stopped, rank 0 let go
  Clock::time_point engine_hold_end_;
  std::set<pid_t> seen_;  // every process seen in the hosts
  Clock::time_point observed_;
  SoakTally tally_;
};

void Soak::Run() {
  for (;;) {
    const bool soaking = Elapsed() < f_.seconds && interrupted == 0;
    if (Clock::now() - observed_ > std::chrono::milliseconds(100)) Observe();
    for (size_t kind : {kElastic, kStatic}) TendJob(kind, soaking);
    while (soaking && next_fault_ < plan_.size() &&
           plan_[next_fault_].at_seconds <= Elapsed()) {
      Inject(plan_[next_fault_++]);
    }
    if (engine_fault_) TendEngineFault(soaking);
    UndoDue(!soaking);
    if (!soaking && !jobs_[kElastic] && !jobs_[kStatic] && undos_.empty())
      return;
    // A held worker's peer listens for at most kEngineHold: look often
    // then; a new worker loads LibTorch for a good part of a second
    // before it joins: 20 ms catch it.
    std::this_thread::sleep_for(std::chrono::milliseconds(engine_listening_ ? 1
                                                          : engine_fault_
                                                              ? 20
                                                              : 100));
  }
}

void Soak::Observe() {
  observed_ = Clock::now();
  for (const ClusterProcess& p : cluster_.Processes()) seen_.insert(p.pid);
}

void Soak::TendJob(size_t kind, bool soaking) {
  std::optional<SoakJob>& job = jobs_[kind];
  if (!job) {
    if (soaking && Clock::now() >= restart_at_[kind]) StartJob(kind);
    return;
  }
  int status = 0;
  const pid_t done = waitpid(job->pid, &status, WNOHANG);
  if (done == job->pid) {
    const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : -1;
    EndJob(kind, code, false);
    return;
  }
  const double ran =
      std::chrono::duration<double>(Clock::now() - job->start).count();
  if (ran < f_.job_timeout && interrupted == 0) return;
  // A hang: the job's group (kolorun and its agents in h1) and its
  // workers in every host.
  kill(-job->pid, SIGKILL);
  for (const ClusterProcess& worker : Workers(&*job)) kill(worker.pid, SIGKILL);
  waitpid(job->pid, &status, 0);
  EndJob(kind, 128 + SIGKILL, interrupted == 0);
}

void Soak::StartJob(size_t kind) {
  SoakJob job;
  job.kind = kind;
  job.generation = ++generations_[kind];
  const std::string stem =
      fmt::format("{}-{}", kJobNames[kind], job.generation);
  job.log = (scratch_ / (stem + ".log")).string();
  job.json_path = (scratch_ / (stem + ".json")).string();
  std::error_code ignored;
  fs::remove(job.json_path, ignored);
  StatusOr<pid_t> pid = StartInHost(
      cluster_.hosts()[kDriverHost].name,
      JobCommand(f_, tools_, cluster_.HostNames(), kind, job.json_path),
      job.log);
  job.start = Clock::now();
  if (!pid.ok()) {
    Say("{}", pid.status().message());
    restart_at_[kind] = job.start + kRestartPause;
    return;
  }
  job.pid = *pid;
  jobs_[kind] = job;
}

void Soak::EndJob(size_t kind, int exit_code, bool hung) {
  const SoakJob job = *jobs_[kind];
  jobs_[kind].reset();
  // As an operator would, start a failed job again after a pause, not in
  // a loop while its host is still unreachable.
  restart_at_[kind] =
      Clock::now() + (exit_code == 0 ? std::chrono::seconds(0) : kRestartPause);
  const std::string output = ReadLog(job.log);
  JobEnding e = ReadJobEnding(
      kJobNames[kind], job.generation,
      std::chrono::duration<double>(Clock::now() - job.start).count(),
      exit_code, hung, fs::exists(job.json_path), output, cluster_.HostNames());
  e.faults = job.faults;
  tally_.RecordJob(e);
  const std::string name = fmt::format("{} job {}", e.job, e.generation);
  if (e.outcome == JobOutcome::kSucceeded) {
    Say("{} succeeded after {:.1f} s: {} recoveries, {} steps lost, "
        "parameters {}",
        name, e.seconds, e.recoveries.rounds, e.recoveries.steps_lost,
        e.parameters_equal ? "equal on every rank" : "NOT shown equal");
  } else if (e.outcome == JobOutcome::kHung) {
    Say("{} HUNG: killed after {:.1f} s; its output ends:{}", name, e.seconds,
        OutputTail(output, 12));
  } else if (!e.cause.empty()) {
    Say("{} failed (exit {}) after {:.1f} s: {}", name, exit_code, e.seconds,
        e.cause);
  } else {
    Say("{} failed (exit {}) after {:.1f} s NAMING NO CAUSE; its output "
        "ends:{}",
        name, exit_code, e.seconds, OutputTail(output, 12));
  }
}

std::vector<ClusterProcess> Soak::Workers(const SoakJob* job) const {
  std::vector<ClusterProcess> workers;
  for (const ClusterProcess& p : cluster_.Processes()) {
    if (p.exe != kolo_train_exe_.string()) continue;
    for (const std::optional<SoakJob>& j : jobs_) {
      if (!j || (job != nullptr && j->pid != job->pid)) continue;
      if (p.cmdline.find(j->json_path) != std::string::npos)
        workers.push_back(p);
    }
  }
  return workers;
}

SoakJob* Soak::JobOf(const ClusterProcess& worker) {
  for (std::optional<SoakJob>& j : jobs_) {
    if (j && worker.cmdline.find(j->json_path) != std::string::npos) return &*j;
  }
  return nullptr;
}

void Soak::Inject(const PlannedFault& fault) {
  bool injected = false;
  switch (fault.kind) {
    case FaultKind::kKill:
    case FaultKind::kStopContinue: injected = SignalWorker(fault); break;
    case FaultKind::kLinkDownUp: injected = CutLink(fault); break;
    case FaultKind::kGarbageStore: injected = GarbageToStore(fault); break;
    case FaultKind::kGarbageEngine:
      if (engine_fault_) {
        Say("{}: one waits already; skipped", FaultName(fault.kind));
        tally_.RecordFault(fault.kind, false);
        return;
      }
      engine_fault_ = fault;
      engine_wait_end_ =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(kEngineWaitSeconds));
      engine_old_workers_.clear();
      for (const ClusterProcess& w : Workers(nullptr))
        engine_old_workers_.insert(w.pid);
      return;  // counted when it fires or gives up
  }
  if (!injected) Say("{}: nothing to hit now; skipped", FaultName(fault.kind));
  tally_.RecordFault(fault.kind, injected);
}

bool Soak::SignalWorker(const PlannedFault& fault) {
  const std::vector<ClusterProcess> workers = Workers(nullptr);
  if (workers.empty()) return false;
  const ClusterProcess& worker = workers[fault.pick % workers.size()];
  SoakJob* job = JobOf(worker);
  const bool stop = fault.kind == FaultKind::kStopContinue;
  if (kill(worker.pid, stop ? SIGSTOP : SIGKILL) != 0) return false;
  const std::string where = fmt::format(
      "worker {} of {} job {} in {}", worker.pid, kJobNames[job->kind],
      job->generation, cluster_.hosts()[worker.host].name);
  ++job->faults;
  if (!stop) {
    Say("kill -9 {}", where);
    return true;
  }
  Say("SIGSTOP {} for {:.1f} s", where, fault.duration);
  undos_.push_back(
      {Clock::now() + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(fault.duration)),
       FaultKind::kStopContinue, worker.pid, 0});
  return true;
}

bool Soak::CutLink(const PlannedFault& fault) {
  const size_t host = 1 + fault.pick % (cluster_.hosts().size() - 1);
  for (const Undo& undo : undos_) {
    if (undo.kind == FaultKind::kLinkDownUp && undo.host == host) return false;
  }
  Status down = cluster_.SetLink(host, false);
  if (!down.ok()) {
    Say("{}", down.message());
    return false;
  }
  std::set<SoakJob*> hit;
  for (const ClusterProcess& worker : Workers(nullptr)) {
    if (worker.host == host && JobOf(worker) != nullptr)
      hit.insert(JobOf(worker));
  }
  for (SoakJob* job : hit) ++job->faults;
  Say("link of {} down for {:.1f} s", cluster_.hosts()[host].name,
      fault.duration);
  undos_.push_back(
      {Clock::now() + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(fault.duration)),
       FaultKind::kLinkDownUp, -1, host});
  return true;
}

bool Soak::GarbageToStore(const PlannedFault& fault) {
  std::vector<SoakJob*> running;
  for (std::optional<SoakJob>& j : jobs_)
    if (j) running.push_back(&*j);
  if (running.empty()) return false;
  SoakJob* job = running[fault.pick % running.size()];
  const std::set<uint64_t> held = SoakCluster::SocketInodes(job->pid);
  for (const Listener& l : cluster_.Listeners(kDriverHost)) {
    if (held.count(l.inode) == 0) continue;
    const size_t from = SourceHost(kDriverHost, fault.pick);
    const int connected = cluster_.SendGarbage(
        from, l.address, l.port, fault.bytes_seed, f_.garbage_connections);
    Say("garbage to the store of {} job {} at {}:{} from {}: {} of {} "
        "connections made",
        kJobNames[job->kind], job->generation, l.address, l.port,
        cluster_.hosts()[from].name, connected, f_.garbage_connections);
    if (connected == 0) return false;
    ++job->faults;
    return true;
  }
  return false;
}

// A worker's engine listens only while its mesh forms, for well under a
// millisecond when the ranks arrive together: too short to be seen from
// outside. So the fault makes the window, on a static job that starts:
// it stops rank 0 while it loads LibTorch; once rank 1 holds a connection
// to the store (and waits in the round's rendezvous for rank 0) it stops
// rank 1 and lets rank 0 go, which completes the rendezvous and listens
// for rank 1; garbage goes to the first engine seen listening, then rank
// 1 continues and must still be admitted.
void Soak::TendEngineFault(bool soaking) {
  if (engine_listening_ && GarbageToEngine(*engine_fault_))
    return EndEngineFault(true, "");
  if (!soaking) return EndEngineFault(false, "the soak ended");
  if (engine_ranks_[0] > 0) {
    if (Clock::now() > engine_hold_end_)
      return EndEngineFault(false, "no engine listened while held");
    if (!engine_listening_) LetRankZeroListen();
    return;
  }
  if (Clock::now() > engine_wait_end_)
    return EndEngineFault(false, "no static job started meanwhile");
  HoldNewStaticJob();
}

void Soak::HoldNewStaticJob() {
  if (!jobs_[kStatic]) return;
  pid_t ranks[2] = {-1, -1};
  for (const ClusterProcess& w : Workers(&*jobs_[kStatic])) {
    if (!engine_old_workers_.insert(w.pid).second) continue;  // seen before
    const std::string rank = ProcessEnvironment(w.pid, "KOLO_RANK");
    if (rank == "0" || rank == "1") ranks[rank == "0" ? 0 : 1] = w.pid;
  }
  // Rank 0 caught before it reached the store (it is still loading),
  // rank 1 not yet there or not yet either.
  const auto early = [](pid_t pid) {
    return SoakCluster::SocketInodes(pid).empty();
  };
  if (ranks[0] <= 0 || !early(ranks[0]) || (ranks[1] > 0 && !early(ranks[1])))
    return;
  if (kill(ranks[0], SIGSTOP) != 0) return;
  engine_ranks_[0] = ranks[0];
  engine_ranks_[1] = ranks[1];
  engine_hold_end_ = Clock::now() + kEngineHold;
  Say("{}: holding rank 0 ({}) of the starting static job {}",
      FaultName(FaultKind::kGarbageEngine), ranks[0],
      jobs_[kStatic]->generation);
}

void Soak::LetRankZeroListen() {
  if (engine_ranks_[1] <= 0) {
    for (const ClusterProcess& w : Workers(&*jobs_[kStatic])) {
      if (ProcessEnvironment(w.pid, "KOLO_RANK") == "1")
        engine_ranks_[1] = w.pid;
    }
  }
  if (engine_ranks_[1] <= 0 ||
      SoakCluster::SocketInodes(engine_ranks_[1]).empty())
    return;
  // A moment for rank 1 to reach the rendezvous through its connection.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(engine_ranks_[1], SIGSTOP);
  kill(engine_ranks_[0], SIGCONT);
  engine_listening_ = true;
  engine_hold_end_ = Clock::now() + kEngineHold;
}

void Soak::EndEngineFault(bool injected, const char* why) {
  for (pid_t& pid : engine_ranks_) {
    if (pid > 0) kill(pid, SIGCONT);
    pid = -1;
  }
  engine_listening_ = false;
  if (!injected) {
    Say("{}: {}; skipped", FaultName(FaultKind::kGarbageEngine), why);
  }
  tally_.RecordFault(FaultKind::kGarbageEngine, injected);
  engine_fault_.reset();
}

bool Soak::GarbageToEngine(const PlannedFault& fault) {
  // Read only the hosts' listening sockets: this runs every few
  // milliseconds while the fault waits. In the hosts only kolorun and
  // kolo-train run, and of kolorun only the drivers (in h1) listen.
  std::set<uint64_t> drivers;
  for (size_t host = 0; host < cluster_.hosts().size(); ++host) {
    for (const Listener& l : cluster_.Listeners(host)) {
      if (host == kDriverHost && drivers.empty()) {
        for (const std::optional<SoakJob>& j : jobs_) {
          if (!j) continue;
          const std::set<uint64_t> held = SoakCluster::SocketInodes(j->pid);
          drivers.insert(held.begin(), held.end());
        }
      }
      if (drivers.count(l.inode) > 0) continue;
      const size_t from = SourceHost(host, fault.pick);
      const int connected = cluster_.SendGarbage(
          from, l.address, l.port, fault.bytes_seed, f_.garbage_connections);
      if (connected == 0) continue;  // the mesh formed meanwhile
      Say("garbage to a worker's engine at {}:{} in {} from {}: {} of {} "
          "connections made",
          l.address, l.port, cluster_.hosts()[host].name,
          cluster_.hosts()[from].name, connected, f_.garbage_connections);
      return true;
    }
  }
  return false;
}

size_t Soak::SourceHost(size_t target, uint64_t pick) const {
  // Another host whose link is up, else the target's own.
  std::vector<size_t> up;
  for (size_t host = 0; host < cluster_.hosts().size(); ++host) {
    bool cut = false;
    for (const Undo& undo : undos_)
      cut = cut || (undo.kind == FaultKind::kLinkDownUp && undo.host == host);
    if (host != target && !cut) up.push_back(host);
  }
  return up.empty() ? target : up[(pick >> 8) % up.size()];
}

void Soak::UndoDue(bool all) {
  const Clock::time_point now = Clock::now();
  std::vector<Undo> later;
  for (const Undo& undo : undos_) {
    if (!all && undo.due > now) {
      later.push_back(undo);
      continue;
    }
    if (undo.kind == FaultKind::kStopContinue) {
      // kolorun --elastic may have killed it meanwhile (no heartbeat).
      const bool alive = kill(undo.pid, SIGCONT) == 0;
      Say("SIGCONT worker {}{}", undo.pid, alive ? "" : " (gone already)");
    } else {
      Status up = cluster_.SetLink(undo.host, true);
      Say("link of {} up{}", cluster_.hosts()[undo.host].name,
          up.ok() ? "" : ": " + up.message());
    }
  }
  undos_ = later;
}

Leftovers Soak::CountLeftovers() {
  Leftovers left;
  // The drivers have exited, and kolorun waits for its ranks before it
  // does; a moment for what is still on its way out.
  std::vector<ClusterProcess> stayed = cluster_.Processes();
  for (int tries = 0; tries < 50 && !stayed.empty(); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stayed = cluster_.Processes();
  }
  for (const ClusterProcess& p : stayed) {
    Say("left behind in {}: pid {} {}", cluster_.hosts()[p.host].name, p.pid,
        p.cmdline);
    seen_.erase(p.pid);  // counted once
  }
  left.processes = static_cast<int64_t>(stayed.size());
  Status down = cluster_.Down();
  if (!down.ok()) Say("{}", down.message());
  left.namespaces = cluster_.NamespacesLeft();
  for (pid_t pid : seen_) {
    std::error_code error;
    const fs::path exe =
        fs::read_symlink(fmt::format("/proc/{}/exe", pid), error);
    if (error) continue;
    if (exe == kolorun_exe_ || exe == kolo_train_exe_) {
      Say("still alive after the cluster went: pid {} {}", pid, exe.string());
      ++left.processes;
    }
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("kolo-", 0) != 0) continue;
    const pid_t owner = static_cast<pid_t>(std::atol(name.c_str() + 5));
    if (seen_.count(owner) == 0) continue;
    Say("shm segment left: /dev/shm/{}", name);
    ++left.shm_segments;
  }
  return left;
}

Status CheckSoakFlags(const SoakFlags& f) {
  if (!(f.seconds > 0) || !(f.mean_gap > 0) || !(f.job_timeout > 0)) {
    return InvalidArgument(
        "--seconds, --mean-gap and --job-timeout must be above 0");
  }
  if (f.np < 1 || f.np > kHosts) {
    return InvalidArgument(fmt::format(
        "--np {}: the elastic job has 1 to {} workers (one per host)", f.np,
        kHosts));
  }
  if (f.garbage_connections < 1 || f.garbage_connections > 100)
    return InvalidArgument("--garbage-connections must be 1 to 100");
  if (f.epochs < 1 || f.batch_size < 1 || f.commit_every < 1) {
    return InvalidArgument(
        "--epochs, --batch-size and --commit-every must be at least 1");
  }
  if (geteuid() != 0) {
    return FailedPrecondition(
        "the soak makes network namespaces (ip netns add, "
        "scripts/netns_cluster.sh), which needs root: run it with sudo");
  }
  return Status::Ok();
}

// SIGINT and SIGTERM set `interrupted` while the soak runs.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

CLI::App* AddSoakCommand(CLI::App& app, SoakFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "soak",
      "chaos on a namespace cluster (root): kill -9, SIGSTOP/SIGCONT, link "
      "down/up and garbage connections against an elastic and a static job; "
      "counts faults, recoveries, failures, hangs and leftovers");
  cmd->add_option("--seconds", f->seconds, "how long to inject faults")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed,
                  "seeds the fault schedule (default: drawn, and printed)");
  cmd->add_option("--mean-gap", f->mean_gap, "mean seconds between two faults")
      ->capture_default_str();
  cmd->add_option("--job-timeout", f->job_timeout,
                  "a job still running this long has hung")
      ->capture_default_str();
  cmd->add_option("--np", f->np, "workers of the elastic job (1 to 3)")
      ->capture_default_str();
  cmd->add_option("--garbage-connections", f->garbage_connections,
                  "connections per garbage fault")
      ->capture_default_str();
  cmd->add_option("--model", f->model, "the jobs' model")
      ->capture_default_str();
  AddDatasetFlags(cmd, &f->dataset, &f->data_dir);
  cmd->add_option("--epochs", f->epochs, "epochs of each job")
      ->capture_default_str();
  cmd->add_option("--batch-size", f->batch_size, "batch per worker")
      ->capture_default_str();
  cmd->add_option("--train-subset", f->train_subset, "training images")
      ->capture_default_str();
  cmd->add_option("--test-subset", f->test_subset, "test images")
      ->capture_default_str();
  cmd->add_option("--commit-every", f->commit_every,
                  "the elastic job's kolo-train --commit-every")
      ->capture_default_str();
  AddToolFlags(cmd, &f->kolorun, &f->kolo_train);
  cmd->add_option("--cluster-script", f->cluster_script,
                  "scripts/netns_cluster.sh (default: installed or in the "
                  "source tree)");
  AddRecordFlag(cmd, &f->json_path);
  return cmd;
}

StatusOr<json> RunSoak(const SoakFlags& f) {
  KOLO_RETURN_IF_ERROR(CheckSoakFlags(f));
  KOLO_ASSIGN_OR_RETURN(const TrainTools tools,
                        FindTrainTools(f.kolorun, f.kolo_train, "", ""));
  const uint64_t seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed)
                                    : std::random_device{}() & 0x7fffffff;
  std::vector<PlannedFault> plan = PlanFaults(seed, f.seconds, f.mean_gap);
  fmt::print(
      "kolo-bench soak: {:.0f} s, seed {} (--seed {} repeats the schedule), "
      "{} faults planned, one every {:.0f} s on average\n",
      f.seconds, seed, seed, plan.size(), f.mean_gap);
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch, ScratchDir::Create("soak"));
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<SoakCluster> cluster,
      SoakCluster::Up(
          f.cluster_script.empty() ? FindClusterScript() : f.cluster_script,
          kHosts));
  for (const SoakHost& host : cluster->hosts())
    fmt::print("kolo-bench soak: host {} {}\n", host.name, host.address);
  std::fflush(stdout);
  Soak soak(f, tools, *cluster, scratch, std::move(plan));
  {
    InterruptGuard guard;
    interrupted = 0;
    soak.Run();
  }
  soak.tally().SetLeftovers(soak.CountLeftovers());
  const SoakTally& tally = soak.tally();
  fmt::print("\n");
  for (const std::string& line : tally.TableLines()) fmt::print("{}\n", line);
  json record = {{"benchmark", "soak"},  {"seconds", f.seconds},
                 {"seed", seed},         {"mean_gap", f.mean_gap},
                 {"np", f.np},           {"model", f.model},
                 {"dataset", f.dataset}, {"job_timeout", f.job_timeout}};
  record.update(tally.ToJson());
  record["interrupted"] = interrupted != 0;
  KOLO_ASSIGN_OR_RETURN(record, FinishRecord(record, f.json_path));
  // The jobs killed by the interruption failed for it, not for a fault:
  // the counts cover only part of a soak, which cannot pass.
  if (interrupted != 0)
    return Aborted("interrupted; the counts above cover the soak so far");
  const std::vector<std::string> problems = tally.Problems();
  if (problems.empty()) return record;
  std::string text = "the soak found problems:";
  for (const std::string& p : problems) text += "\n  " + p;
  return Internal(text);
}

}  // namespace kolo::bench
