#include "elastic.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "agent_link.h"
#include "child_watcher.h"
#include "cluster.h"
#include "job.h"
#include "kolo_internal/config.h"
#include "kolo_internal/elastic.h"
#include "kolo_internal/net.h"
#include "kolo_internal/store.h"
#include "launcher.h"
#include "metrics_service.h"
#include "output.h"
#include "remote.h"

namespace kolo {
namespace kolorun {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kStoreHost = "127.0.0.1";
// How often the driver looks at heartbeats, reports and the clock while
// nothing else wakes it.
constexpr milliseconds kTick{50};
// Deaths that come together (a host lost, two workers killed at once) make
// one round rather than one each.
constexpr milliseconds kRoundDebounce{50};
// A member reported its round broken though kolorun saw nobody die: the
// death may still be on its way (SIGCHLD); after this, a round of the same
// workers is published.
constexpr milliseconds kBrokenGrace{300};
constexpr milliseconds kDiscoveryInterval{1000};
constexpr milliseconds kDiscoveryTimeout{10000};
constexpr milliseconds kTermGrace{2000};
// Workers still waiting to join when the job has succeeded are told to stop
// after this; members get as long as they need.
constexpr milliseconds kFinishGrace{1000};

std::string Seconds1(milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", duration.count() / 1000.0);
  return text;
}

}  // namespace

StatusOr<std::vector<HostSlots>> ParseDiscoveredHosts(
    const std::string& output, const std::string& script) {
  if (output.find_first_not_of(" \t\r\n") == std::string::npos)
    return std::vector<HostSlots>();
  return ParseHostfile(
      output, "the output of --host-discovery-script '" + script + "'");
}

StatusOr<std::string> RunDiscoveryScript(const std::string& script,
                                         milliseconds timeout) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string output;
  const Clock::time_point deadline = Clock::now() + timeout;
  bool timed_out = false;
  while (true) {
    const auto left = duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Timeout("--host-discovery-script '" + script +
                   "' did not finish within " + Seconds1(timeout));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return InvalidArgument("--host-discovery-script '" + script + "' " +
                           DescribeWaitStatus(wait_status));
  }
  return output;
}

std::vector<int64_t> NextRoundMembers(const std::vector<int64_t>& previous,
                                      const std::vector<int64_t>& ready,
                                      int32_t max_workers) {
  const std::set<int64_t> ready_set(ready.begin(), ready.end());
  std::vector<int64_t> members;
  std::set<int64_t> taken;
  for (int64_t worker : previous) {
    if (ready_set.count(worker) && taken.insert(worker).second)
      members.push_back(worker);
  }
  std::vector<int64_t> newcomers;
  for (int64_t worker : ready_set) {
    if (!taken.count(worker)) newcomers.push_back(worker);
  }
  members.insert(members.end(), newcomers.begin(), newcomers.end());
  if (members.size() > static_cast<size_t>(std::max(0, max_workers)))
    members.resize(static_cast<size_t>(std::max(0, max_workers)));
  return members;
}

namespace {

// One host the job may use.
struct HostRecord {
  std::string name;
  int32_t slots = 0;
  bool listed = true;  // the discovery script still lists it
  int32_t failures = 0;
  std::optional<Clock::time_point> blacklisted_until;
};

struct Worker {
  int64_t id = 0;
  std::string host;
  // Its number in the driver's ChildWatcher: the worker's process, or for
  // a worker on another host its agent (closing whose stdin stops it).
  size_t child = 0;
  // Heartbeats: the counter's last value and when it last changed.
  int64_t beats = 0;
  Clock::time_point last_beat{};
  bool evicted = false;
  bool removed = false;  // left out of a round on purpose (host removed)
  bool stop_sent = false;
};

class Driver {
 public:
  Driver(const LaunchOptions& options, std::string program_path,
         std::string self, SignalWatcher* signals, TcpStoreServer* server,
         StoreInfo store)
      : options_(options),
        program_path_(std::move(program_path)),
        self_(std::move(self)),
        signals_(signals),
        store_(server->local()),
        store_info_(std::move(store)),
        watcher_(signals, [this](size_t child, int wait_status) {
          OnExit(child, wait_status);
        }) {}

  int Run();
  // Settings for every worker started on this host (NAME=VALUE).
  void AddLocalEnvironment(const std::vector<std::string>& settings) {
    base_env_.insert(base_env_.end(), settings.begin(), settings.end());
  }

 private:
  enum class Phase {
    kRunning,    // rounds come and go
    kFinishing,  // a member succeeded: no new rounds, no new workers
    kStopping,   // failing or signalled: SIGTERM sent, SIGKILL at deadline
  };

  Status InitHosts();
  void Tick(Clock::time_point now);
  void Discover(Clock::time_point now);
  void FillSlots(Clock::time_point now);
  Worker* Spawn(const std::string& host);
  // A worker on this host; fills `format` with its tags. Like rank 0 of a
  // plain job, worker 0's stdout is a terminal when kolorun's is one
  // (launcher.h), so that it may redraw a line in place.
  StatusOr<Child> StartLocal(const Worker& worker, RelayFormat* format);
  // A worker on another host, through an agent of its own (agent.h): the
  // preflight and the launch, under --start-timeout. Returns the agent.
  StatusOr<Child> StartRemote(const Worker& worker, EnvList settings);
  // Where a remote worker's engine listens: its host's address in the
  // store's subnet, else its first one.
  std::string AddressNearStore(
      const std::vector<AgentAddress>& addresses) const;
  // What every worker is told, besides where it runs.
  EnvList WorkerSettings(const Worker& worker) const;
  void CheckHeartbeats(Clock::time_point now);
  void CheckBrokenRound(Clock::time_point now);
  void MaybePublishRound(Clock::time_point now);
  void PublishRound(const std::vector<int64_t>& members);
  // Told by watcher_ of a worker's exit, once its output is relayed.
  void OnExit(size_t child, int wait_status);
  void OnExit(Worker* worker, int wait_status);
  void RecordDeathInNews(const Worker& worker);
  // Whether every member of the current round passed its gate.
  bool RoundFormed();
  // Closes the current round's gate unless every member passed it: those
  // waiting there stop waiting, with `why`.
  void CloseGate(const std::string& why);
  void CountHostFailure(const std::string& host, Clock::time_point now);
  void Fail(int exit_code, const std::string& why);
  void HandleSignals();
  bool Running(const Worker& worker) const {
    return watcher_.running(worker.child);
  }
  // Every message of the driver goes through watcher_, which keeps a line
  // redrawn in place below it.
  void Say(const std::string& text) const { watcher_.Message(text); }
  std::vector<int64_t> ReadyWorkers() const;
  std::optional<int32_t> RankOf(int64_t worker) const;
  std::string Describe(const Worker& worker) const;
  HostRecord* FindHost(const std::string& name);
  void AddHost(const HostSlots& host);
  std::string ReadKey(const std::string& key) const;

  const LaunchOptions& options_;
  const std::string program_path_;
  const std::string self_;  // this kolorun, which other hosts run as agent
  SignalWatcher* const signals_;
  Store& store_;
  const StoreInfo store_info_;
  // The address the store listens on, which other hosts' workers reach.
  const std::string store_host_ =
      store_info_.address.substr(0, store_info_.address.rfind(':'));
  std::vector<std::string> base_env_ = CurrentEnvironment();
  ChildWatcher watcher_;

  std::vector<HostRecord> hosts_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int64_t next_worker_id_ = 0;
  // The first workers: round 0 waits for all of them (or their deaths).
  std::set<int64_t> first_workers_;

  int64_t round_ = -1;
  std::vector<int64_t> members_;  // of round_, in rank order
  int32_t resets_ = 0;
  std::optional<Clock::time_point> change_noticed_;  // debounce
  std::optional<Clock::time_point> broken_noticed_;
  std::optional<Clock::time_point> short_since_;  // below --min-np since
  Clock::time_point next_discovery_{};

  Phase phase_ = Phase::kRunning;
  std::optional<Clock::time_point> finish_deadline_;
  std::optional<Clock::time_point> finish_kill_deadline_;
  Clock::time_point kill_deadline_{};
  bool kill_sent_ = false;
  int exit_code_ = 0;
};

std::string Driver::ReadKey(const std::string& key) const {
  StatusOr<std::string> value = store_.Get(key, milliseconds(0));
  return value.ok() ? *value : std::string();
}

void Driver::AddHost(const HostSlots& host) {
  HostRecord record;
  record.name = host.name;
  record.slots = host.slots;
  hosts_.push_back(std::move(record));
}

HostRecord* Driver::FindHost(const std::string& name) {
  for (HostRecord& host : hosts_) {
    if (host.name == name) return &host;
  }
  return nullptr;
}

Status Driver::InitHosts() {
  std::vector<HostSlots> hosts = options_.hosts;
  if (!options_.host_discovery_script.empty()) {
    KOLO_ASSIGN_OR_RETURN(
        std::string output,
        RunDiscoveryScript(options_.host_discovery_script, kDiscoveryTimeout));
    KOLO_ASSIGN_OR_RETURN(
        hosts, ParseDiscoveredHosts(output, options_.host_discovery_script));
  }
  if (hosts.empty() && options_.host_discovery_script.empty()) {
    hosts.push_back(HostSlots{"localhost", options_.max_np});
  }
  for (const HostSlots& host : hosts) AddHost(host);
  return Status::Ok();
}

EnvList Driver::WorkerSettings(const Worker& worker) const {
  EnvList settings = JobSettings(options_, store_info_);
  settings.emplace_back(env::kElasticWorker, std::to_string(worker.id));
  // Workers wait for a round somewhat longer than kolorun waits for
  // workers, so that kolorun's message, not theirs, ends a starved job.
  settings.emplace_back(env::kElasticTimeoutSeconds,
                        std::to_string(options_.elastic_timeout_seconds + 30));
  if (worker.host != "localhost")
    settings.emplace_back(env::kHostId, worker.host);
  return settings;
}

Worker* Driver::Spawn(const std::string& host) {
  auto worker = std::make_unique<Worker>();
  worker->id = next_worker_id_++;
  worker->host = host;
  const std::string id = std::to_string(worker->id);
  RelayFormat format;
  StatusOr<Child> started = Internal("not started");
  if (IsLocalHost(host)) {
    started = StartLocal(*worker, &format);
  } else {
    // Its agent tags the lines.
    started = StartRemote(*worker, WorkerSettings(*worker));
  }
  if (!started.ok()) {
    Say("worker " + id + " on " + host + ": " + started.status().message());
    return nullptr;
  }
  worker->child = watcher_.Add(*started, format);
  if (options_.verbose) {
    Say("worker " + id + " on " + host + ": pid " +
        std::to_string(started->pid));
  }
  workers_.push_back(std::move(worker));
  return workers_.back().get();
}

StatusOr<Child> Driver::StartLocal(const Worker& worker, RelayFormat* format) {
  const std::string tag = "[w" + std::to_string(worker.id) + "]";
  format->stdout_prefix = tag + "<stdout>: ";
  format->stderr_prefix = tag + "<stderr>: ";
  EnvList settings = WorkerSettings(worker);
  ChildSpec child;
  child.path = program_path_;
  child.argv = options_.command;
  child.env = base_env_;
  for (const char* name : {env::kRank, env::kSize, env::kLocalRank,
                           env::kLocalSize, env::kCrossRank, env::kCrossSize}) {
    UnsetEnv(&child.env, name);
  }
  // Its peers on other hosts reach it where they reach the store.
  if (store_host_ != kStoreHost)
    settings.emplace_back(env::kGlooHostname, store_host_);
  for (const auto& [name, value] : settings) SetEnv(&child.env, name, value);
  if (worker.id == 0) {
    DrawInPlaceThrough(STDOUT_FILENO, format->stdout_prefix.size(), &child);
    format->stdout_in_place = child.stdout_terminal.has_value();
  }
  return SpawnChild(child, signals_->original_mask());
}

StatusOr<Child> Driver::StartRemote(const Worker& worker, EnvList settings) {
  std::vector<AgentLink> links;
  links.push_back(StartAgent(options_, worker.host, self_, signals_));
  AgentLink& link = links.front();
  auto failed = [&](const std::string& why) {
    std::string problems;
    for (const std::string& problem : link.problems)
      problems += (problems.empty() ? "" : "; ") + problem;
    StopAgents(&links);
    return FailedPrecondition(problems.empty() ? why : problems);
  };
  if (!link.problems.empty()) return failed("");
  const auto deadline = Clock::now() + seconds(options_.start_timeout_seconds);
  std::vector<std::optional<PreflightReply>> preflight;
  if (!ExchangeTyped(&links, {SerializeMessage(PreflightRequestFor(options_))},
                     deadline, signals_, &preflight) ||
      !preflight[0]) {
    return failed("no preflight answer");
  }
  if (!preflight[0]->error.empty()) return failed(preflight[0]->error);
  settings.emplace_back(env::kGlooHostname,
                        AddressNearStore(preflight[0]->addresses));
  ProbeRequest probe;
  probe.timeout_ms = 1000;
  std::vector<std::optional<ProbeReply>> probed;
  if (!ExchangeTyped(&links, {SerializeMessage(probe)}, deadline, signals_,
                     &probed) ||
      !probed[0]) {
    return failed("no probe answer");
  }
  LaunchRequest launch;
  launch.ranks.host = worker.host;
  launch.ranks.local_size = 1;
  launch.ranks.size = 1;
  launch.command = options_.command;
  launch.settings = std::move(settings);
  launch.bind_to = BindTo::kNone;
  launch.verbose = options_.verbose;
  launch.tag = "w" + std::to_string(worker.id);
  launch.name = "worker " + std::to_string(worker.id);
  WriteAll(link.child.stdin_fd, SerializeMessage(launch) + "\n");
  if (!Trim(link.err).empty()) Say(worker.host + ": " + Trim(link.err));
  return link.child;
}

std::string Driver::AddressNearStore(
    const std::vector<AgentAddress>& addresses) const {
  std::string address;
  for (const AgentAddress& candidate : addresses) {
    if (address.empty()) address = candidate.address;
    StatusOr<bool> near =
        AddressInSubnet(store_host_, candidate.address + "/" +
                                         std::to_string(candidate.prefix));
    if (near.ok() && *near) return candidate.address;
  }
  return address;
}

std::optional<int32_t> Driver::RankOf(int64_t worker) const {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] == worker) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

std::string Driver::Describe(const Worker& worker) const {
  std::string text = "worker " + std::to_string(worker.id) + " (";
  if (std::optional<int32_t> rank = RankOf(worker.id)) {
    text += "rank " + std::to_string(*rank) + " of round " +
            std::to_string(round_) + " ";
  }
  return text + "on " + worker.host + ")";
}

std::vector<int64_t> Driver::ReadyWorkers() const {
  std::vector<int64_t> ready;
  for (const auto& worker : workers_) {
    if (Running(*worker) && worker->beats > 0 && !worker->evicted &&
        !worker->removed) {
      ready.push_back(worker->id);
    }
  }
  return ready;
}

int Driver::Run() {
  Status hosts = InitHosts();
  if (!hosts.ok()) {
    Say(hosts.message());
    return 1;
  }
  // The first workers, placed on the hosts in order.
  int32_t to_start = options_.num_ranks;
  for (HostRecord& host : hosts_) {
    for (int32_t slot = 0; slot < host.slots && to_start > 0; ++slot) {
      if (Worker* worker = Spawn(host.name)) first_workers_.insert(worker->id);
      --to_start;
    }
  }
  if (to_start > 0) {
    Say("the hosts have fewer slots than -np " +
        std::to_string(options_.num_ranks) + "; started " +
        std::to_string(options_.num_ranks - to_start));
  }
  next_discovery_ = Clock::now() + kDiscoveryInterval;

  // While running, the job goes on without any worker too: hosts may come
  // back, and --elastic-timeout ends the wait.
  while (phase_ == Phase::kRunning || watcher_.AnyRunning() ||
         watcher_.AnyStreamOpen()) {
    Tick(Clock::now());
    const ChildWatcher::Ready ready =
        watcher_.Poll(static_cast<int>(kTick.count()));
    if (!ready.error.empty()) Fail(1, "poll failed: " + ready.error);
    if (ready.signals) HandleSignals();
    // Output of exited workers is complete once their pipes close; a
    // grandchild holding one open must not keep kolorun alive.
    if (!watcher_.AnyRunning()) watcher_.DrainAndCloseAll();
  }
  return exit_code_;
}

void Driver::Tick(Clock::time_point now) {
  if (phase_ == Phase::kStopping) {
    if (!kill_sent_ && now >= kill_deadline_) {
      for (auto& worker : workers_) {
        if (Running(*worker)) watcher_.Signal(worker->child, SIGKILL);
      }
      kill_sent_ = true;
    }
    return;
  }
  CheckHeartbeats(now);
  if (phase_ == Phase::kFinishing) {
    // The members of the round that trained finish on their own. Workers
    // waiting to join would wait for a round that never comes, and so
    // would the members of a round published just before the success,
    // which never formed: its gate is closed and they are stopped too.
    if (finish_deadline_ && now >= *finish_deadline_) {
      const bool formed = round_ >= 0 && RoundFormed();
      if (!formed) CloseGate("the job finished");
      for (auto& worker : workers_) {
        const bool waiting = !RankOf(worker->id) || !formed;
        if (Running(*worker) && waiting && !worker->stop_sent) {
          watcher_.Signal(worker->child, SIGTERM);
          worker->stop_sent = true;
        }
      }
      finish_deadline_.reset();  // once
      finish_kill_deadline_ = now + kTermGrace;
    }
    if (finish_kill_deadline_ && now >= *finish_kill_deadline_) {
      for (auto& worker : workers_) {
        if (Running(*worker) && worker->stop_sent)
          watcher_.Signal(worker->child, SIGKILL);
      }
      finish_kill_deadline_.reset();
    }
    return;
  }
  if (!options_.host_discovery_script.empty() && now >= next_discovery_) {
    Discover(now);
    next_discovery_ = now + kDiscoveryInterval;
  }
  FillSlots(now);
  CheckBrokenRound(now);
  MaybePublishRound(now);
}

void Driver::Discover(Clock::time_point now) {
  StatusOr<std::string> output =
      RunDiscoveryScript(options_.host_discovery_script, kDiscoveryTimeout);
  StatusOr<std::vector<HostSlots>> found =
      output.ok()
          ? ParseDiscoveredHosts(*output, options_.host_discovery_script)
          : StatusOr<std::vector<HostSlots>>(output.status());
  if (!found.ok()) {
    // The hosts stay as they were; a script that fails once is not a
    // reason to drop every host.
    Say(found.status().message() + "; keeping the hosts known");
    return;
  }
  std::set<std::string> listed;
  for (const HostSlots& host : *found) {
    listed.insert(host.name);
    HostRecord* record = FindHost(host.name);
    if (record == nullptr) {
      AddHost(host);
      Say("host " + host.name + " appeared with " + std::to_string(host.slots) +
          " slots");
    } else {
      if (!record->listed) Say("host " + host.name + " is back");
      record->listed = true;
      record->slots = host.slots;
    }
  }
  for (HostRecord& host : hosts_) {
    if (!host.listed || listed.count(host.name)) continue;
    host.listed = false;
    Say("host " + host.name +
        " is gone from the discovery script; its "
        "workers leave at the next commit");
    for (auto& worker : workers_) {
      if (Running(*worker) && worker->host == host.name) worker->removed = true;
    }
    change_noticed_ = now;
  }
}

void Driver::FillSlots(Clock::time_point now) {
  // Until the first round, -np workers; then as many as fit.
  const int32_t target = round_ < 0 ? options_.num_ranks : options_.max_np;
  int32_t alive = 0;
  std::map<std::string, int32_t> per_host;
  for (const auto& worker : workers_) {
    if (!Running(*worker) || worker->evicted || worker->removed) continue;
    ++alive;
    ++per_host[worker->host];
  }
  for (HostRecord& host : hosts_) {
    if (host.blacklisted_until && now >= *host.blacklisted_until) {
      host.blacklisted_until.reset();
      host.failures = 0;
      Say("host " + host.name + " is off the blacklist");
    }
    if (!host.listed || host.blacklisted_until) continue;
    while (alive < target && per_host[host.name] < host.slots) {
      if (Spawn(host.name) == nullptr) {
        CountHostFailure(host.name, now);
        break;
      }
      ++alive;
      ++per_host[host.name];
    }
  }
}

void Driver::CheckHeartbeats(Clock::time_point now) {
  const milliseconds limit = seconds(options_.heartbeat_timeout_seconds);
  for (auto& worker : workers_) {
    if (!Running(*worker) || worker->evicted) continue;
    StatusOr<int64_t> beats = store_.Add(elastic::BeatKey(worker->id), 0);
    if (!beats.ok()) continue;
    if (*beats != worker->beats) {
      if (worker->beats == 0 && round_ >= 0) change_noticed_ = now;
      worker->beats = *beats;
      worker->last_beat = now;
      continue;
    }
    if (worker->beats == 0 || now - worker->last_beat < limit) continue;
    // Members of a finished job stop beating as they leave Run.
    if (phase_ == Phase::kFinishing) continue;
    Say(Describe(*worker) + " sent no heartbeat for " +
        Seconds1(duration_cast<milliseconds>(now - worker->last_beat)) +
        " (frozen?); evicting and killing it");
    worker->evicted = true;
    RecordDeathInNews(*worker);
    // SIGKILL reaches a stopped process too.
    watcher_.Signal(worker->child, SIGKILL);
    CountHostFailure(worker->host, now);
    change_noticed_ = now;
  }
}

void Driver::CheckBrokenRound(Clock::time_point now) {
  if (round_ < 0 || change_noticed_) return;
  StatusOr<int64_t> broken = store_.Add(elastic::RoundBrokenKey(round_), 0);
  if (!broken.ok() || *broken == 0) return;
  if (!broken_noticed_) {
    broken_noticed_ = now;
    return;
  }
  if (now - *broken_noticed_ < kBrokenGrace) return;
  Say("round " + std::to_string(round_) +
      " broke without a worker dying (see the workers' messages); starting "
      "round " +
      std::to_string(round_ + 1) + " with the same workers");
  PublishRound(NextRoundMembers(members_, ReadyWorkers(), options_.max_np));
}

void Driver::MaybePublishRound(Clock::time_point now) {
  std::vector<int64_t> ready = ReadyWorkers();
  if (round_ < 0) {
    // Round 0 waits for every first worker that still lives.
    for (const auto& worker : workers_) {
      if (first_workers_.count(worker->id) && Running(*worker) &&
          worker->beats == 0) {
        return;
      }
    }
  } else {
    if (!change_noticed_) return;
    if (now - *change_noticed_ < kRoundDebounce) return;
    std::vector<int64_t> next =
        NextRoundMembers(members_, ready, options_.max_np);
    if (next == members_) {
      change_noticed_.reset();
      return;
    }
  }
  if (static_cast<int32_t>(ready.size()) < options_.min_np) {
    if (!short_since_) {
      short_since_ = now;
      Say(std::to_string(ready.size()) +
          " workers ready, fewer than --min-np " +
          std::to_string(options_.min_np) + "; waiting up to " +
          std::to_string(options_.elastic_timeout_seconds) +
          " s for more (--elastic-timeout)");
    }
    if (now - *short_since_ >= seconds(options_.elastic_timeout_seconds)) {
      Fail(1, "only " + std::to_string(ready.size()) +
                  " workers after waiting " +
                  std::to_string(options_.elastic_timeout_seconds) +
                  " s (--elastic-timeout), fewer than --min-np " +
                  std::to_string(options_.min_np) + "; stopping the job");
    }
    return;
  }
  short_since_.reset();
  PublishRound(NextRoundMembers(members_, ready, options_.max_np));
}

void Driver::PublishRound(const std::vector<int64_t>& members) {
  change_noticed_.reset();
  broken_noticed_.reset();
  // Members still gathering for the old round must not wait for one that
  // went away.
  if (round_ >= 0) CloseGate("replaced by round " + std::to_string(round_ + 1));
  if (round_ >= 0) {
    ++resets_;
    if (options_.reset_limit >= 0 && resets_ > options_.reset_limit) {
      Fail(1, "the job needed a reset for the " + std::to_string(resets_) +
                  (resets_ == 1 ? "st" : "th") +
                  " time, more than --reset-limit " +
                  std::to_string(options_.reset_limit) + "; stopping the job");
      return;
    }
  }
  ++round_;
  members_ = members;
  (void)store_.Set(elastic::RoundMembersKey(round_),
                   elastic::FormatMembers(members_));
  (void)store_.Set(elastic::kLatestRoundKey, std::to_string(round_));
  std::string list;
  for (int64_t worker : members_) list += " " + std::to_string(worker);
  Say("round " + std::to_string(round_) + ": " +
      std::to_string(members_.size()) + " workers (rank order:" + list + ")");
}

bool Driver::RoundFormed() {
  StatusOr<int64_t> arrivals = store_.Add(elastic::GateArrivalsKey(round_), 0);
  return arrivals.ok() && *arrivals % elastic::kGateClosed >=
                              static_cast<int64_t>(members_.size());
}

void Driver::CloseGate(const std::string& why) {
  StatusOr<int64_t> arrivals =
      store_.Add(elastic::GateArrivalsKey(round_), elastic::kGateClosed);
  if (arrivals.ok() && *arrivals % elastic::kGateClosed <
                           static_cast<int64_t>(members_.size())) {
    (void)store_.Set(elastic::GateKey(round_), why);
  }
}

void Driver::RecordDeathInNews(const Worker& worker) {
  std::optional<int32_t> rank = RankOf(worker.id);
  if (!rank || round_ < 0) return;
  const std::string key = elastic::RoundFailureNewsKey(round_);
  std::string news = ReadKey(key);
  news += (news.empty() ? "" : ",") + std::to_string(*rank);
  (void)store_.Set(key, news);
}

void Driver::CountHostFailure(const std::string& host, Clock::time_point now) {
  HostRecord* record = FindHost(host);
  if (record == nullptr || record->blacklisted_until) return;
  if (++record->failures < kBlacklistFailures) return;
  record->blacklisted_until =
      now + seconds(options_.blacklist_cooldown_seconds);
  Say("host " + host + " failed " + std::to_string(record->failures) +
      " times: no new workers there for " +
      std::to_string(options_.blacklist_cooldown_seconds) +
      " s (--blacklist-cooldown)");
}

void Driver::OnExit(size_t child, int wait_status) {
  for (auto& worker : workers_) {
    if (worker->child == child) return OnExit(worker.get(), wait_status);
  }
}

void Driver::OnExit(Worker* worker, int wait_status) {
  const bool success = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  const bool member = RankOf(worker->id).has_value();
  if (phase_ == Phase::kStopping) {
    if (options_.verbose)
      Say(Describe(*worker) + " " + DescribeWaitStatus(wait_status));
    return;
  }
  if (success) {
    // A member's success ends the job; anyone else's exit 0 is its own
    // leaving (removed, or told to stop while waiting).
    if (member && phase_ == Phase::kRunning) {
      phase_ = Phase::kFinishing;
      finish_deadline_ = Clock::now() + kFinishGrace;
    }
    if (options_.verbose) Say(Describe(*worker) + " finished");
    if (!member) change_noticed_ = Clock::now();
    return;
  }
  if (phase_ == Phase::kFinishing) return;  // stopped waiting to join
  if (worker->removed && !member) {
    if (options_.verbose) Say(Describe(*worker) + " left (host removed)");
    return;
  }
  if (round_ < 0) {
    // Nothing trained yet: a worker that cannot start (a bad flag, missing
    // data) would fail the same way again and again.
    Say(Describe(*worker) + " " + DescribeWaitStatus(wait_status) +
        " before the first round formed");
    Fail(ExitCodeOf(wait_status),
         "a job whose workers fail before it starts is not retried; stopping");
    return;
  }
  if (worker->evicted) {
    Say(Describe(*worker) + " " + DescribeWaitStatus(wait_status) +
        " after its eviction");
  } else {
    Say(Describe(*worker) + " " + DescribeWaitStatus(wait_status) + "; " +
        std::to_string(ReadyWorkers().size()) + " workers remain");
    RecordDeathInNews(*worker);
    CountHostFailure(worker->host, Clock::now());
  }
  first_workers_.erase(worker->id);
  change_noticed_ = Clock::now();
}

void Driver::Fail(int exit_code, const std::string& why) {
  if (phase_ == Phase::kStopping) return;
  Say(why);
  exit_code_ = exit_code;
  phase_ = Phase::kStopping;
  for (auto& worker : workers_) {
    if (Running(*worker)) watcher_.Signal(worker->child, SIGTERM);
  }
  kill_deadline_ = Clock::now() + kTermGrace;
}

void Driver::HandleSignals() {
  for (int signal : signals_->ReadPending()) {
    if (signal == SIGCHLD) {
      watcher_.ReapExited();
      continue;
    }
    if (phase_ == Phase::kStopping) {
      // A second signal: no more grace.
      kill_deadline_ = Clock::now();
      continue;
    }
    Fail(128 + signal, std::string("received ") + strsignal(signal) +
                           "; stopping every worker");
  }
}

}  // namespace

int RunElastic(const LaunchOptions& options, const std::string& program_path,
               SignalWatcher* signals) {
  StatusOr<std::string> self = SelfPath();
  StatusOr<std::string> secret = NewJobSecret();
  if (!self.ok() || !secret.ok()) {
    Say((!self.ok() ? self.status() : secret.status()).message());
    return 1;
  }
  // On loopback when every host is this one; otherwise where a static
  // job's store would listen, found through agents on the hosts, as their
  // names may resolve only there.
  std::string store_host = kStoreHost;
  const bool every_host_local =
      std::all_of(options.hosts.begin(), options.hosts.end(),
                  [](const HostSlots& host) { return IsLocalHost(host.name); });
  if (!every_host_local) {
    int exit_code = 0;
    std::optional<std::string> found =
        FindStoreAddress(options, signals, &exit_code);
    if (!found) return exit_code;
    store_host = *found;
  }
  StatusOr<HostedStore> hosted = StartJobStore(store_host, *secret);
  if (!hosted.ok()) {
    Say(hosted.status().ToString());
    return 1;
  }
  Driver driver(options, program_path, *self, signals, hosted->server.get(),
                hosted->info);
  // The workers on this host serve their metrics here; a worker on another
  // host has an agent of its own, and one port cannot serve several.
  std::unique_ptr<MetricsService> metrics;
  if (options.metrics_port) {
    std::vector<std::string> settings;
    LauncherOptions unused;
    StatusOr<MetricsEnvironment> here =
        ReadMetricsEnvironment(ProcessEnvironment());
    StatusOr<std::unique_ptr<MetricsService>> started = StartHostMetrics(
        *options.metrics_port, MetricsAddress(options, ""), JobName(options),
        here.ok() ? here->host : std::string("localhost"), &settings, &unused);
    if (!started.ok()) {
      Say(started.status().message());
      return 1;
    }
    metrics = *std::move(started);
    driver.AddLocalEnvironment(settings);
  }
  const int exit_code = driver.Run();
  hosted->server->Stop();
  return exit_code;
}

}  // namespace kolorun
}  // namespace kolo
