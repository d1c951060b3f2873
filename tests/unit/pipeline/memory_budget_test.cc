#include "common/memory_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace spanhouse::pipeline {
namespace {

using std::chrono::milliseconds;

TEST(MemoryBudget, ReserveWithinGivesUpWhenNothingIsReleased) {
  MemoryBudget budget(100);
  ASSERT_TRUE(budget.TryReserve(80));
  EXPECT_FALSE(budget.ReserveWithin(30, milliseconds(20)));
  EXPECT_FALSE(budget.ReserveWithin(30, milliseconds(0)));
  EXPECT_EQ(budget.used(), 80u);
  EXPECT_TRUE(budget.ReserveWithin(20, milliseconds(0)));  // fits: no wait at all
  EXPECT_EQ(budget.used(), 100u);
}

TEST(MemoryBudget, ReserveWithinTakesRoomReleasedWhileWaiting) {
  MemoryBudget budget(100);
  ASSERT_TRUE(budget.TryReserve(90));
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(50));
    budget.Release(60);
  });
  // Generous bound: the release comes long before it.
  EXPECT_TRUE(budget.ReserveWithin(50, milliseconds(60000)));
  releaser.join();
  EXPECT_EQ(budget.used(), 80u);
}

TEST(MemoryBudget, ManyWaitersEachGetRoomOnce) {
  MemoryBudget budget(100);
  ASSERT_TRUE(budget.TryReserve(100));
  std::vector<std::thread> waiters;
  std::atomic<int> got{0};
  for (int i = 0; i < 8; ++i) {
    waiters.emplace_back([&] {
      if (budget.ReserveWithin(10, milliseconds(60000))) got++;
    });
  }
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
    budget.Release(10);
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(got.load(), 8);
  EXPECT_EQ(budget.used(), 80u);  // 100 - 100 released + 8 x 10 taken
}

}  // namespace
}  // namespace spanhouse::pipeline
