#include "hosts.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kolo {
namespace kolorun {
namespace {

// "name:slots,..." so that a whole parse is one comparison.
std::string Describe(const std::vector<HostSlots>& hosts) {
  std::string text;
  for (const HostSlots& host : hosts) {
    if (!text.empty()) text += ",";
    text += host.name + ":" + std::to_string(host.slots);
  }
  return text;
}

// "host@first+count#cross;..." for the same reason.
std::string Describe(const std::vector<HostAssignment>& placement) {
  std::string text;
  for (const HostAssignment& a : placement) {
    if (!text.empty()) text += ";";
    text += a.host + "@" + std::to_string(a.first_rank) + "+" +
            std::to_string(a.num_ranks) + "#" + std::to_string(a.cross_rank);
  }
  return text;
}

// Whether `text` holds `part`; gtest prints both when it does not.
::testing::AssertionResult Contains(const std::string& text,
                                    const std::string& part) {
  if (text.find(part) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "'" << text << "' does not contain '" << part << "'";
}

std::string HostListError(const std::string& text) {
  StatusOr<std::vector<HostSlots>> hosts = ParseHostList(text);
  EXPECT_FALSE(hosts.ok()) << text << " parsed as " << Describe(*hosts);
  if (hosts.ok()) return "";
  EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument);
  return hosts.status().message();
}

std::string HostfileError(const std::string& text) {
  StatusOr<std::vector<HostSlots>> hosts = ParseHostfile(text, "HOSTS");
  EXPECT_FALSE(hosts.ok()) << text << " parsed as " << Describe(*hosts);
  if (hosts.ok()) return "";
  EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument);
  return hosts.status().message();
}

std::vector<HostSlots> Hosts(const std::string& list) {
  StatusOr<std::vector<HostSlots>> hosts = ParseHostList(list);
  EXPECT_TRUE(hosts.ok()) << hosts.status().ToString();
  return hosts.value_or({});
}

std::string Placement(const std::string& list, int32_t num_ranks) {
  StatusOr<std::vector<HostAssignment>> placement =
      PlaceRanks(Hosts(list), num_ranks);
  EXPECT_TRUE(placement.ok()) << placement.status().ToString();
  return placement.ok() ? Describe(*placement) : "";
}

TEST(ParseHostListTest, ReadsSlotsAndDefaultsToOne) {
  StatusOr<std::vector<HostSlots>> hosts = ParseHostList("h1:2,h2:2,h3");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(Describe(*hosts), "h1:2,h2:2,h3:1");
  EXPECT_EQ(Describe(Hosts("node-7.example.com:16")), "node-7.example.com:16");
  EXPECT_EQ(Describe(Hosts("10.0.0.1:4,10.0.0.2")), "10.0.0.1:4,10.0.0.2:1");
  EXPECT_EQ(Describe(Hosts("ns_0:3")), "ns_0:3");
  EXPECT_EQ(Describe(Hosts("h1:007")), "h1:7");
  EXPECT_EQ(Describe(Hosts("h1:65536")), "h1:65536");
}

TEST(ParseHostListTest, TakesIpv6InBracketsWithoutThem) {
  EXPECT_EQ(Describe(Hosts("[::1]:2,[fe80::1%eth0],[10.0.0.1]:3")),
            "::1:2,fe80::1%eth0:1,10.0.0.1:3");
  EXPECT_TRUE(
      Contains(HostListError("::1:2"), "an IPv6 address goes in brackets"));
  EXPECT_TRUE(Contains(HostListError("fe80::1"), "'[fe80::1]:2'"));
  EXPECT_EQ(HostListError("[::1:2"), "-H entry '[::1:2': '[' without ']'");
  EXPECT_EQ(HostListError("[::1]2"),
            "-H entry '[::1]2': expected ':slots' after ']', got '2'");
  EXPECT_TRUE(
      Contains(HostListError("[::g]"), "host name '::g' may not contain 'g'"));
  EXPECT_EQ(HostListError("[]:2"), "-H entry '[]:2': the host name is empty");
}

TEST(ParseHostListTest, NamesTheEntryWithBadSlots) {
  EXPECT_EQ(HostListError("h0,h1:x"),
            "-H entry 'h1:x': slots must be a positive integer");
  EXPECT_EQ(HostListError("h1:0"),
            "-H entry 'h1:0': slots must be a positive integer");
  EXPECT_EQ(HostListError("h1:-2"),
            "-H entry 'h1:-2': slots must be a positive integer");
  EXPECT_EQ(HostListError("h1:+2"),
            "-H entry 'h1:+2': slots must be a positive integer");
  EXPECT_EQ(HostListError("h1:"),
            "-H entry 'h1:': slots must be a positive integer");
  EXPECT_EQ(HostListError("h1:65537"),
            "-H entry 'h1:65537': slots must be at most 65536");
  EXPECT_EQ(HostListError("h1:99999999999999999999999"),
            "-H entry 'h1:99999999999999999999999': slots must be at most "
            "65536");
}

TEST(ParseHostListTest, RejectsEmptyListsAndEntries) {
  EXPECT_TRUE(Contains(HostListError(""), "-H is empty"));
  EXPECT_EQ(HostListError("h1,,h2"), "-H 'h1,,h2': entry 2 is empty");
  EXPECT_EQ(HostListError("h1,"), "-H 'h1,': entry 2 is empty");
  EXPECT_EQ(HostListError(","), "-H ',': entry 1 is empty");
  EXPECT_EQ(HostListError(":2"), "-H entry ':2': the host name is empty");
}

TEST(ParseHostListTest, RejectsWhitespaceAndOddCharacters) {
  EXPECT_TRUE(Contains(HostListError("h1:2, h2:2"),
                       "-H entry ' h2:2' may not contain a space"));
  EXPECT_TRUE(Contains(HostListError("h1:2 "),
                       "-H entry 'h1:2 ' may not contain a space"));
  EXPECT_TRUE(Contains(HostListError("h1\t"), "may not contain a tab"));
  EXPECT_EQ(HostListError("user@h1"),
            "-H entry 'user@h1': host name 'user@h1' may not contain '@'");
  EXPECT_EQ(HostListError("h/1"),
            "-H entry 'h/1': host name 'h/1' may not contain '/'");
  EXPECT_EQ(HostListError("-oProxyCommand=x"),
            "-H entry '-oProxyCommand=x': host name '-oProxyCommand=x' may "
            "not start with '-'");
}

TEST(ParseHostListTest, RejectsAHostListedTwiceNamingBothEntries) {
  EXPECT_EQ(HostListError("h1:2,h2,h1"),
            "-H entries 1 ('h1:2') and 3 ('h1') both name host 'h1'; list it "
            "once with all its slots");
  EXPECT_TRUE(Contains(HostListError("[::1]:2,h2,[::1]"),
                       "entries 1 ('[::1]:2') and 3 ('[::1]')"));
}

TEST(ParseHostfileTest, ReadsTheSharedFormat) {
  StatusOr<std::vector<HostSlots>> hosts = ParseHostfile(
      "# the cluster\n"
      "h1 slots=2\n"
      "\n"
      "   \t\n"
      "h2:3   # horovodrun's form\n"
      "h3\n"
      "  h4   slots = 4   max_slots=8\n"
      "h5 max_slots=8 slots=5\r\n"
      "10.0.0.1 slots=2#no space before the comment\n"
      "fe80::1%eth0 slots=6\n"
      "[::1]:7\n"
      "[::2] slots=8\n"
      "last",  // no final newline
      "HOSTS");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(Describe(*hosts),
            "h1:2,h2:3,h3:1,h4:4,h5:5,10.0.0.1:2,fe80::1%eth0:6,::1:7,::2:8,"
            "last:1");
}

TEST(ParseHostfileTest, NamesTheLineOfABadSlotCount) {
  EXPECT_EQ(HostfileError("h0\n# c\nh1 slots=0\n"),
            "HOSTS:3: 'slots=0' must be a positive integer");
  EXPECT_EQ(HostfileError("h1 slots=x"),
            "HOSTS:1: 'slots=x' must be a positive integer");
  EXPECT_EQ(HostfileError("h1 slots="),
            "HOSTS:1: 'slots=' must be a positive integer");
  EXPECT_EQ(HostfileError("\nh1 slots=70000"),
            "HOSTS:2: 'slots=70000' must be at most 65536");
  EXPECT_EQ(HostfileError("h1 max_slots=0"),
            "HOSTS:1: 'max_slots=0' must be a positive integer");
  EXPECT_EQ(HostfileError("h1\nh2:0"),
            "HOSTS:2: 'h2:0': slots must be a positive integer");
}

TEST(ParseHostfileTest, NamesTheLineOfABadHost) {
  EXPECT_EQ(HostfileError("h1\nslots=2\n"),
            "HOSTS:2: expected a host name first, got 'slots=2'");
  EXPECT_EQ(HostfileError("h1 slots=2 extra\n"),
            "HOSTS:1: unexpected 'extra' after host 'h1' (expected slots=N)");
  EXPECT_EQ(HostfileError("h1 cpus=2\n"),
            "HOSTS:1: unknown setting 'cpus=2' (kolorun reads slots=N and "
            "max_slots=N)");
  EXPECT_EQ(HostfileError("h1 slots=2 slots=3\n"),
            "HOSTS:1: slots given twice ('slots=2' and 'slots=3')");
  EXPECT_EQ(HostfileError("h1:2 slots=3\n"),
            "HOSTS:1: slots given twice ('h1:2' and 'slots=3')");
  EXPECT_EQ(HostfileError("\n\nuser@h1\n"),
            "HOSTS:3: host name 'user@h1' may not contain '@'");
  EXPECT_EQ(HostfileError("-h1\n"),
            "HOSTS:1: host name '-h1' may not start with '-'");
  EXPECT_EQ(HostfileError("[::1 slots=2\n"),
            "HOSTS:1: '[::1': '[' without ']'");
  EXPECT_EQ(HostfileError("fe80::1% slots=2\n"),
            "HOSTS:1: host name 'fe80::1%' has an empty %zone");
}

TEST(ParseHostfileTest, RejectsAHostListedTwiceNamingBothLines) {
  EXPECT_EQ(HostfileError("h1 slots=2\nh2\n# h1 again\nh1 slots=1\n"),
            "HOSTS:4: host 'h1' is already listed on line 1; list it once "
            "with all its slots");
  // The same host in two spellings of the format.
  EXPECT_TRUE(Contains(HostfileError("h1:2\nh1 slots=2\n"),
                       "HOSTS:2: host 'h1' is already listed on line 1"));
}

TEST(ParseHostfileTest, RejectsAFileWithoutHosts) {
  EXPECT_EQ(HostfileError(""), "HOSTS: no hosts (the file is empty)");
  EXPECT_EQ(HostfileError("# only a comment\n\n   \n"),
            "HOSTS: no hosts (every line is blank or a comment)");
}

class ReadHostfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "kolo_hosts_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& path : written_) unlink(path.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }

  std::string dir_;
  std::vector<std::string> written_;
};

TEST_F(ReadHostfileTest, ReadsAFile) {
  std::string path = Write("hosts", "h1 slots=2\n# c\nh2:3\n");
  StatusOr<std::vector<HostSlots>> hosts = ReadHostfile(path);
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(Describe(*hosts), "h1:2,h2:3");
}

TEST_F(ReadHostfileTest, NamesTheFileInParseErrors) {
  std::string path = Write("bad", "h1\nh2 slots=0\n");
  StatusOr<std::vector<HostSlots>> hosts = ReadHostfile(path);
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(hosts.status().message(),
            path + ":2: 'slots=0' must be a positive integer");
}

TEST_F(ReadHostfileTest, NamesAMissingFileAndWhy) {
  std::string path = dir_ + "/no_such_hostfile";
  StatusOr<std::vector<HostSlots>> hosts = ReadHostfile(path);
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hosts.status().message(),
            "cannot read hostfile '" + path + "': No such file or directory");
}

TEST_F(ReadHostfileTest, NamesADirectoryAndWhy) {
  StatusOr<std::vector<HostSlots>> hosts = ReadHostfile(dir_);
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(hosts.status().message(),
            "cannot read hostfile '" + dir_ + "': Is a directory");
}

TEST(PlaceRanksTest, FillsHostsInOrder) {
  EXPECT_EQ(Placement("h1:2,h2:2", 4), "h1@0+2#0;h2@2+2#1");
  EXPECT_EQ(Placement("a,b,c,d", 4), "a@0+1#0;b@1+1#1;c@2+1#2;d@3+1#3");
  EXPECT_EQ(Placement("h1:3,h2:1", 3), "h1@0+3#0");
  EXPECT_EQ(Placement("h1:3,h2:1", 4), "h1@0+3#0;h2@3+1#1");
  EXPECT_EQ(Placement("h1:1,h2:3", 3), "h1@0+1#0;h2@1+2#1");
  EXPECT_EQ(Placement("h1:4,h2:4,h3:4", 6), "h1@0+4#0;h2@4+2#1");
  EXPECT_EQ(Placement("h1:2", 1), "h1@0+1#0");
}

TEST(PlaceRanksTest, ReportsMoreRanksThanSlots) {
  StatusOr<std::vector<HostAssignment>> placement =
      PlaceRanks(Hosts("h1:2,h2:2"), 5);
  ASSERT_FALSE(placement.ok());
  EXPECT_EQ(placement.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(placement.status().message(),
            "-np 5 is more than the 4 slots of the hosts (h1:2, h2:2)");

  placement = PlaceRanks(Hosts("[::1]:2"), 3);
  ASSERT_FALSE(placement.ok());
  EXPECT_TRUE(Contains(placement.status().message(), "([::1]:2)"));
}

TEST(PlaceRanksTest, ShortensALongHostList) {
  std::string list;
  for (int i = 0; i < 10; ++i) list += (i ? ",h" : "h") + std::to_string(i);
  StatusOr<std::vector<HostAssignment>> placement = PlaceRanks(Hosts(list), 11);
  ASSERT_FALSE(placement.ok());
  EXPECT_EQ(placement.status().message(),
            "-np 11 is more than the 10 slots of the hosts (h0:1, h1:1, h2:1, "
            "h3:1, h4:1, h5:1, h6:1, h7:1, and 2 more)");
}

TEST(PlaceRanksTest, RejectsNoRanksAndNoHosts) {
  EXPECT_FALSE(PlaceRanks(Hosts("h1"), 0).ok());
  EXPECT_FALSE(PlaceRanks({}, 1).ok());
  EXPECT_FALSE(PlaceRanks({HostSlots{"h1", 0}}, 1).ok());
}

TEST(IsLocalHostTest, KnowsThisMachineByItsNames) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("LocalHost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_TRUE(IsLocalHost("::1"));
  char buffer[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(gethostname(buffer, sizeof(buffer)), 0);
  const std::string self = buffer;
  EXPECT_TRUE(IsLocalHost(self));
  const std::string short_name = self.substr(0, self.find('.'));
  EXPECT_TRUE(IsLocalHost(short_name));
  if (short_name == self) {
    EXPECT_TRUE(IsLocalHost(self + ".example.com"));
  }
  EXPECT_FALSE(IsLocalHost(self + "-not"));
  EXPECT_FALSE(IsLocalHost("kolo-no-such-host.invalid"));
  EXPECT_FALSE(IsLocalHost("10.255.255.1"));
  EXPECT_FALSE(IsLocalHost(""));
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
