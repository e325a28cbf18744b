#include "remote.h"

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "node.h"

namespace kolo {
namespace kolorun {
namespace {

using Argv = std::vector<std::string>;

const Argv kAgent = {"/opt/kolo/bin/kolorun", "--agent"};

TEST(RemoteCommandTest, ThisHostRunsTheAgentItself) {
  LaunchOptions options;
  EXPECT_EQ(RemoteCommand(options, "localhost", kAgent), kAgent);
  options.remote_shell = "ip netns exec {host}";
  EXPECT_EQ(RemoteCommand(options, "127.0.0.1", kAgent), kAgent);
}

TEST(RemoteCommandTest, SshNeverPromptsAndTakesTheFlags) {
  LaunchOptions options;
  options.start_timeout_seconds = 7;
  options.ssh_port = 2222;
  options.ssh_identity_file = "/keys/id";
  options.ssh_config_file = "/keys/config";
  EXPECT_EQ(
      RemoteCommand(options, "h2", kAgent),
      (Argv{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=7", "-o",
            "StrictHostKeyChecking=accept-new", "-p", "2222", "-i", "/keys/id",
            "-F", "/keys/config", "h2", "/opt/kolo/bin/kolorun --agent"}));
  LaunchOptions plain;
  Argv argv = RemoteCommand(plain, "h2", kAgent);
  EXPECT_EQ(argv.back(), "/opt/kolo/bin/kolorun --agent");
  EXPECT_EQ(argv[argv.size() - 2], "h2");
}

TEST(RemoteCommandTest, TemplateGetsTheHostAndTheArgvAppended) {
  LaunchOptions options;
  options.remote_shell = "ip netns exec {host}";
  EXPECT_EQ(RemoteCommand(options, "k-h2", kAgent),
            (Argv{"ip", "netns", "exec", "k-h2", "/opt/kolo/bin/kolorun",
                  "--agent"}));
}

TEST(RemoteCommandTest, CommandPlaceholderGetsOneQuotedShellString) {
  LaunchOptions options;
  options.remote_shell = "ssh -J bastion {host} {command}";
  const Argv agent = {"/path with space/kolorun", "--agent"};
  EXPECT_EQ(RemoteCommand(options, "h3", agent),
            (Argv{"ssh", "-J", "bastion", "h3",
                  "'/path with space/kolorun' --agent"}));
}

TEST(ReadJobSecretTest, FileThenVariable) {
  const std::string path = ::testing::TempDir() + "/kolo-secret-test";
  {
    std::ofstream file(path);
    file << "s3cret \nsecond line\n";
  }
  EXPECT_EQ(*ReadJobSecret(path, std::string("from-env")), "s3cret");
  EXPECT_EQ(*ReadJobSecret("", std::string("from-env")), "from-env");
  StatusOr<std::string> none = ReadJobSecret("", std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--secret-file F or KOLO_JOB_SECRET"),
            std::string::npos)
      << none.status().message();
  StatusOr<std::string> missing =
      ReadJobSecret(path + ".missing", std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path + ".missing"),
            std::string::npos);
  {
    std::ofstream file(path);
    file << "\n";
  }
  StatusOr<std::string> empty = ReadJobSecret(path, std::nullopt);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no secret"),
            std::string::npos);
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
