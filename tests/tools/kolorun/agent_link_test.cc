// The driver's side of its agents: what an agent sends back is bounded
// before it is kept, however much it sends.
#include "agent_link.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test_signals.h"

namespace kolo {
namespace kolorun {
namespace {

using Clock = std::chrono::steady_clock;

AgentLink LinkTo(const std::string& script) {
  ChildSpec spec;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  spec.stdin_pipe = true;
  StatusOr<Child> child = SpawnChild(spec, TestSignals()->original_mask());
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  AgentLink link;
  link.place.host = "flood";
  link.child = *child;
  return link;
}

// An "agent" that answers 20 MiB without a newline on stdout and 1 MiB on
// stderr: the exchange gives up on it once its line passes the bound on a
// message, keeping neither flood.
TEST(AgentLinkTest, AnAnswerPastTheMessageBoundIsRefusedNotKept) {
  std::vector<AgentLink> links;
  links.push_back(LinkTo(
      "head -c 1048576 /dev/zero >&2; head -c 20971520 /dev/zero; sleep 30"));
  std::vector<std::optional<std::string>> answers;
  const auto start = Clock::now();
  ASSERT_TRUE(Exchange(&links, {"{}"}, start + std::chrono::seconds(20),
                       PreflightReply::kType, TestSignals(), &answers));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  EXPECT_FALSE(answers[0].has_value());
  ASSERT_EQ(links[0].problems.size(), 1u);
  EXPECT_NE(links[0].problems[0].find("without ending its line"),
            std::string::npos)
      << links[0].problems[0].substr(0, 200);
  EXPECT_LE(links[0].out.size(), kMaxAgentMessageBytes + 1);
  EXPECT_LE(links[0].err.size(), size_t{64 * 1024});
  StopAgents(&links);
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
