#include "agent_messages.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo {
namespace kolorun {
namespace {

using ::testing::HasSubstr;

template <typename Message>
Message RoundTrip(const Message& message) {
  StatusOr<Message> parsed =
      ParseMessage<Message>(SerializeMessage(message), "the test");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : Message();
}

// The error a line gives when parsed as `Message`.
template <typename Message>
std::string ErrorOf(const std::string& line) {
  StatusOr<Message> parsed = ParseMessage<Message>(line, "the test");
  EXPECT_FALSE(parsed.ok()) << line;
  return parsed.ok() ? std::string() : parsed.status().message();
}

LaunchRequest SomeLaunch() {
  LaunchRequest launch;
  launch.ranks.host = "h2";
  launch.ranks.first_rank = 4;
  launch.ranks.local_size = 2;
  launch.ranks.size = 8;
  launch.ranks.cross_rank = 1;
  launch.ranks.cross_size = 3;
  launch.command = {"./train", "--epochs", "2"};
  launch.settings = {{"KOLO_HOST_ID", "h2"}, {"KOLO_X", "a=b c"}};
  launch.bind_to = BindTo::kCore;
  launch.verbose = true;
  return launch;
}

TEST(AgentMessagesTest, PreflightRoundTrips) {
  PreflightRequest request{"./train", "/work", "eth0,!docker0"};
  PreflightRequest back = RoundTrip(request);
  EXPECT_EQ(back.program, "./train");
  EXPECT_EQ(back.cwd, "/work");
  EXPECT_EQ(back.network_interface, "eth0,!docker0");

  PreflightReply reply;
  reply.hostname = "h1";
  reply.program = "/work/train";
  reply.addresses = {{"eth0", "10.0.0.1", 24, 40001},
                     {"eth1", "10.1.0.1", 16, 40002}};
  PreflightReply reply_back = RoundTrip(reply);
  EXPECT_EQ(reply_back.hostname, "h1");
  EXPECT_EQ(reply_back.program, "/work/train");
  ASSERT_EQ(reply_back.addresses.size(), 2u);
  EXPECT_EQ(reply_back.addresses[1].interface, "eth1");
  EXPECT_EQ(reply_back.addresses[1].address, "10.1.0.1");
  EXPECT_EQ(reply_back.addresses[1].prefix, 16);
  EXPECT_EQ(reply_back.addresses[1].port, 40002);
  EXPECT_EQ(reply_back.error, "");
}

TEST(AgentMessagesTest, AFailedPreflightCarriesOnlyItsError) {
  PreflightReply reply;
  reply.hostname = "h1";
  reply.error = "program './train' not found (in /work)";
  const std::string line = SerializeMessage(reply);
  // The keys a reader tests for are there only when they mean something.
  EXPECT_THAT(line, HasSubstr("\"error\":"));
  EXPECT_THAT(line, ::testing::Not(HasSubstr("\"program\":")));
  EXPECT_EQ(RoundTrip(reply).error, reply.error);
}

TEST(AgentMessagesTest, ProbeRoundTrips) {
  ProbeRequest request;
  request.targets = {{"h2", "10.0.0.2", 40001}, {"h3", "10.0.0.3", 40009}};
  request.timeout_ms = 1500;
  ProbeRequest back = RoundTrip(request);
  ASSERT_EQ(back.targets.size(), 2u);
  EXPECT_EQ(back.targets[1].host, "h3");
  EXPECT_EQ(back.targets[1].address, "10.0.0.3");
  EXPECT_EQ(back.targets[1].port, 40009);
  EXPECT_EQ(back.timeout_ms, 1500);

  ProbeReply reply;
  reply.results = {{"h2", "10.0.0.2", ""}, {"h3", "10.0.0.3", "refused"}};
  ProbeReply reply_back = RoundTrip(reply);
  ASSERT_EQ(reply_back.results.size(), 2u);
  EXPECT_EQ(reply_back.results[0].error, "");
  EXPECT_EQ(reply_back.results[1].error, "refused");
}

TEST(AgentMessagesTest, LaunchRoundTrips) {
  LaunchRequest launch = SomeLaunch();
  launch.tag = "w5";
  launch.name = "worker 5";
  launch.metrics = LaunchMetrics{9400, "10.0.0.2", "job"};
  LaunchRequest back = RoundTrip(launch);
  EXPECT_EQ(back.ranks.host, "h2");
  EXPECT_EQ(back.ranks.first_rank, 4);
  EXPECT_EQ(back.ranks.local_size, 2);
  EXPECT_EQ(back.ranks.size, 8);
  EXPECT_EQ(back.ranks.cross_rank, 1);
  EXPECT_EQ(back.ranks.cross_size, 3);
  EXPECT_EQ(back.command, launch.command);
  EXPECT_EQ(back.settings, launch.settings);
  EXPECT_EQ(back.bind_to, BindTo::kCore);
  EXPECT_TRUE(back.verbose);
  EXPECT_EQ(back.tag, "w5");
  EXPECT_EQ(back.name, "worker 5");
  ASSERT_TRUE(back.metrics.has_value());
  EXPECT_EQ(back.metrics->port, 9400);
  EXPECT_EQ(back.metrics->address, "10.0.0.2");
  EXPECT_EQ(back.metrics->job, "job");

  // The optional keys stay optional.
  LaunchRequest plain = RoundTrip(SomeLaunch());
  EXPECT_EQ(plain.tag, "");
  EXPECT_FALSE(plain.metrics.has_value());
}

TEST(AgentMessagesTest, TheWireFormatIsTheProtocolsOwn) {
  ProbeRequest request;
  request.targets = {{"h2", "10.0.0.2", 40001}};
  request.timeout_ms = 100;
  EXPECT_EQ(SerializeMessage(request),
            "{\"targets\":[{\"address\":\"10.0.0.2\",\"host\":\"h2\","
            "\"port\":40001}],\"timeout_ms\":100,\"type\":\"probe\"}");
  EXPECT_THAT(SerializeMessage(SomeLaunch()),
              HasSubstr("\"settings\":[[\"KOLO_HOST_ID\",\"h2\"],"));
}

TEST(AgentMessagesTest, ErrorsNameTheMessageAndWhatIsWrongWithIt) {
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"probe\""),
            "bad 'probe' message from the test: not JSON");
  EXPECT_EQ(ErrorOf<ProbeRequest>("[1,2]"),
            "bad 'probe' message from the test: not an object but an array");
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"launch\"}"),
            "bad 'probe' message from the test: its type is 'launch'");
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"probe\",\"timeout_ms\":5}"),
            "bad 'probe' message from the test: 'targets' is missing");
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"probe\",\"targets\":[{\"host\":"
                                  "\"h\",\"address\":\"a\",\"port\":\"80\"}],"
                                  "\"timeout_ms\":5}"),
            "bad 'probe' message from the test: 'targets[0].port' should be an "
            "integer, not a string");
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"probe\",\"targets\":[7],"
                                  "\"timeout_ms\":5}"),
            "bad 'probe' message from the test: 'targets[0]' should be an "
            "object, not an integer");
  EXPECT_EQ(ErrorOf<PreflightRequest>(
                "{\"type\":\"preflight\",\"program\":1,\"cwd\":\"/\","
                "\"network_interface\":\"\"}"),
            "bad 'preflight' message from the test: 'program' should be a "
            "string, not an integer");
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"probe\",\"targets\":[],"
                                  "\"timeout_ms\":1.5}"),
            "bad 'probe' message from the test: 'timeout_ms' should be an "
            "integer, not a number with a fraction");
}

TEST(AgentMessagesTest, NumbersOutOfTheirRangeAreRejected) {
  EXPECT_EQ(ErrorOf<PreflightReply>(
                "{\"type\":\"preflight\",\"hostname\":\"h\",\"addresses\":"
                "[{\"interface\":\"e\",\"address\":\"a\",\"prefix\":24,"
                "\"port\":70000}]}"),
            "bad 'preflight' message from the test: 'addresses[0].port' is "
            "70000, outside 0..65535");
  EXPECT_EQ(ErrorOf<ProbeRequest>("{\"type\":\"probe\",\"targets\":[],"
                                  "\"timeout_ms\":-1}"),
            "bad 'probe' message from the test: 'timeout_ms' is -1, outside "
            "0..9223372036854775807");
  // Beyond int64: out of every range.
  EXPECT_THAT(ErrorOf<ProbeRequest>("{\"type\":\"probe\",\"targets\":[],"
                                    "\"timeout_ms\":18446744073709551615}"),
              HasSubstr("'timeout_ms' is 18446744073709551615, outside"));
  LaunchRequest launch = SomeLaunch();
  std::string line = SerializeMessage(launch);
  const std::string first = "\"first_rank\":4";
  line.replace(line.find(first), first.size(), "\"first_rank\":4294967296");
  EXPECT_THAT(ErrorOf<LaunchRequest>(line),
              HasSubstr("'ranks.first_rank' is 4294967296, outside 0.."));
}

TEST(AgentMessagesTest, LaunchSettingsAndBindToAreChecked) {
  std::string line = SerializeMessage(SomeLaunch());
  std::string bad_pair = line;
  const std::string pair = "[\"KOLO_X\",\"a=b c\"]";
  bad_pair.replace(bad_pair.find(pair), pair.size(), "[\"KOLO_X\"]");
  EXPECT_EQ(ErrorOf<LaunchRequest>(bad_pair),
            "bad 'launch' message from the test: 'settings[1]' should be "
            "[name, value], two strings, not [\"KOLO_X\"]");
  std::string bad_bind = line;
  bad_bind.replace(bad_bind.find("\"core\""), 6, "\"socket\"");
  EXPECT_EQ(ErrorOf<LaunchRequest>(bad_bind),
            "bad 'launch' message from the test: 'bind_to' should be "
            "\"core\" or \"none\", not \"socket\"");
  std::string bad_command = line;
  bad_command.replace(bad_command.find("\"--epochs\""), 10, "2");
  EXPECT_EQ(ErrorOf<LaunchRequest>(bad_command),
            "bad 'launch' message from the test: 'command[1]' should be a "
            "string, not an integer");
}

TEST(AgentMessagesTest, OversizeLinesAreRejectedUnread) {
  const std::string huge(kMaxAgentMessageBytes + 1, ' ');
  EXPECT_THAT(ErrorOf<ProbeReply>(huge),
              HasSubstr("bad 'probe' message from the test: 16777217 bytes, "
                        "more than the 16777216 allowed"));
  EXPECT_FALSE(IsMessageOfType(huge, "probe"));
}

TEST(AgentMessagesTest, IsMessageOfTypeLooksOnlyAtTheType) {
  EXPECT_TRUE(IsMessageOfType("{\"type\":\"probe\"}", "probe"));
  EXPECT_FALSE(IsMessageOfType("{\"type\":\"probe\"}", "launch"));
  EXPECT_FALSE(IsMessageOfType("{\"type\":3}", "probe"));
  EXPECT_FALSE(IsMessageOfType("Welcome to h2", "probe"));
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
