#include "dlaunch/host.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

namespace dlaunch::host {
namespace {

// What an lstat() of a private directory may show, and what dlaunch says of it (uid 1000 asks).
TEST(PrivateDir, OnlyAnOwnDirectoryWithMode0700IsTrusted) {
    struct Row {
        mode_t mode;
        uid_t owner;
        std::string problem;
    };
    for (const Row& r : std::vector<Row>{{S_IFDIR | 0700, 1000, ""},
                                         {S_IFLNK | 0777, 1000, "is a symbolic link"},
                                         {S_IFIFO | 0600, 1000, "is not a directory"},
                                         {S_IFREG | 0600, 1000, "is not a directory"},
                                         {S_IFDIR | 0700, 65534, "is owned by uid 65534, not 1000"},
                                         {S_IFDIR | 0700, 0, "is owned by uid 0, not 1000"},
                                         {S_IFDIR | 01777, 1000, "has mode 1777, not 0700"},
                                         {S_IFDIR | 0755, 1000, "has mode 0755, not 0700"}}) {
        struct stat st {};
        st.st_mode = r.mode;
        st.st_uid = r.owner;
        EXPECT_EQ(private_dir_problem(st, 1000), r.problem) << std::oct << r.mode;
    }
}

TEST(PrivateDir, TheFifosAndThePlannedDirectoryHaveFixedNames) {
    EXPECT_EQ(watchdog_fifo_in("/tmp/dlaunch-private-42-Ab12Cd"), "/tmp/dlaunch-private-42-Ab12Cd/watchdog");
    EXPECT_EQ(heartbeat_fifo_in("/tmp/dlaunch-private-42-Ab12Cd"), "/tmp/dlaunch-private-42-Ab12Cd/heartbeat");
    EXPECT_EQ(private_dir_template("<agent pid>"), tmpdir() + "/dlaunch-private-<agent pid>-XXXXXX");
}

TEST(RandomRunId, AVersion4UuidNeverTheSameTwice) {
    std::set<std::string> seen;
    const std::regex uuid4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    for (int i = 0; i < 100; ++i) {
        const std::string id = random_run_id();
        EXPECT_TRUE(std::regex_match(id, uuid4)) << id;
        seen.insert(id);
    }
    EXPECT_EQ(seen.size(), 100U);
}

}  // namespace
}  // namespace dlaunch::host
