#include "runtime/coordinator.h"

#include <algorithm>
#include <set>

namespace kolo {

std::string DescribeWait(const WaitingOperation& w, int64_t seconds) {
  std::string missing;
  for (int32_t r : w.missing_ranks)
    missing += (missing.empty() ? "" : ",") + std::to_string(r);
  return "tensor '" + w.name + "' has waited " + std::to_string(seconds) +
         " s for rank" + (w.missing_ranks.size() > 1 ? "s " : " ") + missing;
}

namespace {

std::string RankList(const std::vector<int32_t>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    text += (i ? "," : "") + std::to_string(ranks[i]);
  }
  return text;
}

bool ZerosAreNeutral(const TensorSpec& spec) {
  return spec.collective == Collective::kAllreduce &&
         (spec.op == ReduceOp::kSum || spec.op == ReduceOp::kAverage);
}

}  // namespace

Coordinator::Coordinator(int32_t world_size, ResponseCache* cache)
    : world_size_(world_size),
      cache_(cache),
      joined_(world_size, false),
      shutting_down_(world_size, false) {}

void Coordinator::Announce(int32_t rank, const TensorSpec& spec,
                           SteadyTime now) {
  auto [it, inserted] = entries_.try_emplace(spec.name);
  Entry& entry = it->second;
  if (inserted) {
    entry.order = next_order_++;
    entry.first_seen = now;
    entry.reported.assign(world_size_, false);
    entry.specs.resize(world_size_);
    order_[entry.order] = spec.name;
  }
  entry.reported[rank] = true;
  entry.specs[rank] = spec;
}

const TensorSpec& Coordinator::Reference(const Entry& entry) const {
  for (int32_t r = 0; r < world_size_; ++r) {
    if (entry.reported[r]) return entry.specs[r];
  }
  return entry
      .specs[0];  // unreachable: an entry exists because a rank reported
}

bool Coordinator::Evaluate(const Entry& entry, ReadyOperation* out) const {
  const TensorSpec* reference = &Reference(entry);
  std::vector<int32_t> missing, joined_missing, gone;
  for (int32_t r = 0; r < world_size_; ++r) {
    if (entry.reported[r]) continue;
    if (joined_[r]) {
      if (!ZerosAreNeutral(*reference)) joined_missing.push_back(r);
    } else if (shutting_down_[r]) {
      gone.push_back(r);
    } else {
      missing.push_back(r);
    }
  }
  out->name = reference->name;
  if (!gone.empty()) {
    out->error = Aborted("tensor '" + reference->name + "': " + RankList(gone) +
                         " shut down without announcing it");
    return true;
  }
  if (!missing.empty()) return false;
  if (!joined_missing.empty()) {
    out->error = InvalidArgument(
        "tensor '" + reference->name + "': " + RankList(joined_missing) +
        " joined; only sum and average allreduces proceed without them, not " +
        CollectiveName(reference->collective));
    return true;
  }
  std::vector<const TensorSpec*> by_rank(world_size_, nullptr);
  out->specs.assign(world_size_, *reference);
  out->joined.assign(world_size_, false);
  for (int32_t r = 0; r < world_size_; ++r) {
    if (entry.reported[r]) {
      by_rank[r] = &entry.specs[r];
      out->specs[r] = entry.specs[r];
    } else {
      out->joined[r] = true;
    }
  }
  out->error = CheckSpecsAgree(by_rank, world_size_);
  return true;
}

CycleDecision Coordinator::Decide(const std::vector<CycleReport>& reports,
                                  SteadyTime now) {
  CycleDecision decision;
  for (int32_t r = 0; r < world_size_; ++r) {
    joined_[r] = reports[r].joined;
    shutting_down_[r] = reports[r].shutting_down;
    if (joined_[r] && std::find(join_order_.begin(), join_order_.end(), r) ==
                          join_order_.end()) {
      join_order_.push_back(r);
    }
  }
  // Bits first, read against the cache as it was when the ranks set them;
  // then full specs, whose names leave the cache (their shape, type or op
  // may have changed).
  for (int32_t r = 0; r < world_size_; ++r) {
    for (int32_t bit : reports[r].cached_bits) {
      Announce(r, cache_->SpecsAt(bit)[r], now);
      ++decision.cache_hits;
    }
  }
  std::set<std::string> stale;
  for (int32_t r = 0; r < world_size_; ++r) {
    for (const TensorSpec& spec : reports[r].specs) {
      Announce(r, spec, now);
      stale.insert(spec.name);
      ++decision.cache_misses;
    }
  }
  for (const std::string& name : stale) cache_->Erase(name);

  // Ready operations in announcement order; a group holds the place of its
  // first member and is filled in once all of its members are ready.
  struct Slot {
    std::string group;  // empty: `operation` itself
    ReadyOperation operation;
  };
  std::vector<Slot> slots;
  std::map<std::string, std::vector<ReadyOperation>> groups;
  std::vector<uint64_t> done;
  for (const auto& [order, name] : order_) {
    const Entry& entry = entries_.at(name);
    ReadyOperation op;
    if (!Evaluate(entry, &op)) continue;
    const TensorSpec& reference = Reference(entry);
    auto failed = failed_groups_.find(reference.group);
    if (!reference.group.empty() && op.error.ok() &&
        failed != failed_groups_.end()) {
      // A member failed earlier: the group cannot complete, so neither can
      // its other members.
      op.error = failed->second.error;
    }
    if (reference.group.empty() || !op.error.ok()) {
      if (!reference.group.empty()) {
        FailedGroup& f =
            failed_groups_
                .try_emplace(reference.group, FailedGroup{op.error, 0})
                .first->second;
        if (++f.members_failed >= reference.group_size)
          failed_groups_.erase(reference.group);
      }
      done.push_back(order);
      slots.push_back(Slot{"", std::move(op)});
    } else {
      std::vector<ReadyOperation>& members = groups[reference.group];
      if (members.empty())
        slots.push_back(Slot{reference.group, ReadyOperation()});
      members.push_back(std::move(op));
    }
  }
  for (Slot& slot : slots) {
    if (slot.group.empty()) {
      decision.ready.push_back(std::move(slot.operation));
      continue;
    }
    std::vector<ReadyOperation>& members = groups[slot.group];
    if (static_cast<int32_t>(members.size()) <
        members.front().specs[0].group_size)
      continue;
    for (ReadyOperation& op : members) {
      done.push_back(entries_.at(op.name).order);
      decision.ready.push_back(std::move(op));
    }
  }
  for (uint64_t order : done) {
    entries_.erase(order_.at(order));
    order_.erase(order);
  }

  decision.all_joined =
      static_cast<int32_t>(join_order_.size()) == world_size_ &&
      std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; });
  if (decision.all_joined) {
    decision.last_joined_rank = join_order_.back();
    join_order_.clear();
  }
  decision.all_shutting_down = std::all_of(
      shutting_down_.begin(), shutting_down_.end(), [](bool s) { return s; });
  return decision;
}

void Coordinator::Completed(const ReadyOperation& operation) {
  if (!operation.error.ok()) return;
  if (std::any_of(operation.joined.begin(), operation.joined.end(),
                  [](bool j) { return j; })) {
    return;
  }
  cache_->Put(operation.specs);
}

std::vector<WaitingOperation> Coordinator::Waiting(
    SteadyTime now, std::chrono::steady_clock::duration older_than) const {
  std::vector<WaitingOperation> waiting;
  for (const auto& [order, name] : order_) {
    const Entry& entry = entries_.at(name);
    if (now - entry.first_seen < older_than) continue;
    WaitingOperation w{name, {}, now - entry.first_seen};
    for (int32_t r = 0; r < world_size_; ++r) {
      if (!entry.reported[r] && !joined_[r]) w.missing_ranks.push_back(r);
    }
    if (!w.missing_ranks.empty()) waiting.push_back(std::move(w));
  }
  return waiting;
}

}  // namespace kolo
