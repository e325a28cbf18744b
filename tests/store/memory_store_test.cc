#include "store/memory_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace kolo {
namespace {

using std::chrono::milliseconds;

TEST(MemoryStoreTest, SetGetAddWait) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  EXPECT_EQ(*store.Get("a", milliseconds(10)), "1");
  EXPECT_EQ(*store.Add("n", 5), 5);
  EXPECT_EQ(*store.Add("n", -2), 3);
  EXPECT_TRUE(store.Wait({"a", "n"}, milliseconds(10)).ok());
}

TEST(MemoryStoreTest, GetWaitsForALaterSet) {
  MemoryStore store;
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    (void)store.Set("late", "here");
  });
  StatusOr<std::string> value = store.Get("late", milliseconds(5000));
  writer.join();
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "here");
}

TEST(MemoryStoreTest, TimeoutsNameTheMissingKey) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("present", "").ok());
  Status s = store.Wait({"present", "absent"}, milliseconds(20));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("'absent'"), std::string::npos);
  EXPECT_EQ(store.Get("nope", milliseconds(1)).status().code(),
            StatusCode::kTimeout);
}

TEST(MemoryStoreTest, AddOnANonNumberIsAnError) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("text", "abc").ok());
  EXPECT_EQ(store.Add("text", 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(MemoryStoreTest, AbortWakesWaiters) {
  MemoryStore store;
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(30));
    store.Abort("going away");
  });
  StatusOr<std::string> value = store.Get("never", milliseconds(10000));
  aborter.join();
  EXPECT_EQ(value.status().code(), StatusCode::kAborted);
}

TEST(MemoryStoreTest, AfterAbortEveryCallFailsWithTheReason) {
  MemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  store.Abort("server stopping");
  EXPECT_EQ(store.Set("b", "2").message(), "server stopping");
  EXPECT_EQ(store.Add("n", 1).status().code(), StatusCode::kAborted);
  EXPECT_EQ(store.Get("a", milliseconds(1)).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(store.Wait({"a"}, milliseconds(1)).code(), StatusCode::kAborted);
}

// The longest timeout there is must not overflow the deadline into the
// past (which would time out at once).
TEST(MemoryStoreTest, TheLongestTimeoutStillWaits) {
  MemoryStore store;
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    (void)store.Set("late", "here");
  });
  StatusOr<std::string> value = store.Get("late", milliseconds::max());
  Status waited = store.Wait({"late"}, milliseconds::max());
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "here");
  EXPECT_TRUE(waited.ok());
}

TEST(MemoryStoreTest, WaitingForNoKeysReturnsAtOnce) {
  MemoryStore store;
  EXPECT_TRUE(store.Wait({}, milliseconds(0)).ok());
}

// Found by fuzz/store_message_fuzzer.cc (the input is
// fuzz/regressions/store_message_fuzzer/add_overflow): an authenticated
// client adds 6701356593419874920 to a counter twice, and the sum
// overflows int64_t in MemoryStore::Add (memory_store.cc:59, UBSan: signed
// integer overflow), which the TCP store's server runs on its thread. A
// sum that does not fit must be refused with the counter's name, and the
// counter left as it was.
TEST(MemoryStoreTest, AnAddThatOverflowsIsRefusedNamingTheCounter) {
  MemoryStore store;
  constexpr int64_t kDelta = 6701356593419874920;
  ASSERT_EQ(*store.Add("steps", kDelta), kDelta);
  StatusOr<int64_t> overflowed = store.Add("steps", kDelta);
  ASSERT_FALSE(overflowed.ok());
  EXPECT_EQ(overflowed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(overflowed.status().message().find("steps"), std::string::npos)
      << overflowed.status().message();
  EXPECT_EQ(*store.Get("steps", milliseconds(10)), std::to_string(kDelta));
}

}  // namespace
}  // namespace kolo
