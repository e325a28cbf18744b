#include "remote.h"

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node.h"

namespace kolo {
namespace kolorun {
namespace {

using Argv = std::vector<std::string>;
using ::testing::HasSubstr;

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
  const std::string from_file = "0123456789abcdef0123456789abcdef";
  const std::string from_env = "another-secret-of-32-bytes-or-so";
  {
    std::ofstream file(path);
    file << from_file << " \nsecond line\n";
  }
  EXPECT_EQ(*ReadJobSecret(path, from_env), from_file);
  EXPECT_EQ(*ReadJobSecret("", from_env), from_env);
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
}

// An empty or short secret (< 16 bytes), in the file or the variable, is
// refused with what held it and how to make a good one.
TEST(ReadJobSecretTest, ShortOrEmptySecretsAreRefused) {
  const std::string path = ::testing::TempDir() + "/kolo-short-secret-test";
  const std::string how = "Make one with: head -c 32 /dev/urandom | base64";
  for (const std::string line : {"", "s3cret", "0123456789abcde"}) {
    {
      std::ofstream file(path);
      file << line << "\n";
    }
    StatusOr<std::string> from_file = ReadJobSecret(path, std::nullopt);
    ASSERT_FALSE(from_file.ok()) << "'" << line << "'";
    EXPECT_EQ(from_file.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(from_file.status().message(),
                HasSubstr("the first line of --secret-file " + path));
    EXPECT_THAT(from_file.status().message(), HasSubstr(how));

    StatusOr<std::string> from_env = ReadJobSecret("", line);
    ASSERT_FALSE(from_env.ok()) << "'" << line << "'";
    EXPECT_THAT(from_env.status().message(),
                HasSubstr("environment variable KOLO_JOB_SECRET"));
    EXPECT_THAT(from_env.status().message(), HasSubstr(how));
  }
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
