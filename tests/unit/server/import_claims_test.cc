#include "server/import_claims.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace spanhouse::server {
namespace {

using Clock = std::chrono::steady_clock;

query::SpanKey Key(uint32_t n) {
  query::SpanKey k;
  k.trace_id[0] = static_cast<uint8_t>(n >> 8);
  k.trace_id[15] = static_cast<uint8_t>(n);
  k.span_id[7] = static_cast<uint8_t>(n);
  k.span_id[0] = static_cast<uint8_t>(n >> 16);
  return k;
}

std::vector<query::SpanKey> Keys(uint32_t from, uint32_t to) {
  std::vector<query::SpanKey> out;
  for (uint32_t n = from; n < to; ++n) out.push_back(Key(n));
  return out;
}

size_t Count(const std::vector<bool>& v) {
  return static_cast<size_t>(std::count(v.begin(), v.end(), true));
}

const auto kSoon = std::chrono::milliseconds(50);
constexpr auto kDurable = ImportClaims::Stage::kDurable;
constexpr auto kStored = ImportClaims::Stage::kStored;

// Two imports that read the store at once (neither finds the spans), then
// claim: A first, then B.
std::pair<ImportClaims::Claim, ImportClaims::Claim> ReadTogether(
    ImportClaims& claims, const std::vector<query::SpanKey>& a_keys,
    const std::vector<query::SpanKey>& b_keys) {
  ImportClaims::Read a = claims.BeginRead();
  ImportClaims::Read b = claims.BeginRead();
  ImportClaims::Claim ca = claims.Take(std::move(a), a_keys);
  ImportClaims::Claim cb = claims.Take(std::move(b), b_keys);
  return {std::move(ca), std::move(cb)};
}

TEST(ImportClaims, AReadBegunBeforeTheStoreSeesTheClaimThoughTheSpansAreStored) {
  // A and B carry the same spans and read the store at once: neither finds them.
  ImportClaims claims;
  ImportClaims::Read a = claims.BeginRead();
  ImportClaims::Read b = claims.BeginRead();
  const auto keys = Keys(0, 10);
  ImportClaims::Claim ca = claims.Take(std::move(a), keys);
  EXPECT_EQ(Count(ca.mine), 10u);
  claims.Stored(ca.flight);  // A stored them: B's read, begun before, may have missed them
  EXPECT_EQ(claims.claimed(), 10u);
  ImportClaims::Claim cb = claims.Take(std::move(b), keys);
  EXPECT_EQ(Count(cb.mine), 0u);  // left out: stored by A
  EXPECT_TRUE(cb.waiting.empty());
  EXPECT_TRUE(claims.Wait(cb, kStored, Clock::now()));
  EXPECT_EQ(claims.claimed(), 0u);  // no read in progress may miss them now
}

TEST(ImportClaims, AClaimIsLetGoOnceStoredWhenNoReadIsInProgress) {
  ImportClaims claims;
  ImportClaims::Claim c = claims.Take(claims.BeginRead(), Keys(0, 5));
  EXPECT_EQ(claims.claimed(), 5u);
  ImportClaims::Read later = claims.BeginRead();  // begun before the store: holds the claim
  claims.Stored(c.flight);
  EXPECT_EQ(claims.claimed(), 5u);
  { ImportClaims::Read gone = std::move(later); }  // its read failed: it ends without a claim
  EXPECT_EQ(claims.claimed(), 0u);
  ImportClaims::Read after = claims.BeginRead();  // begun after the store: finds them itself
  EXPECT_EQ(claims.claimed(), 0u);
}

TEST(ImportClaims, ASecondImportWaitsForTheFirstToStoreWhatItClaimed) {
  ImportClaims claims;
  auto [ca, cb] = ReadTogether(claims, Keys(0, 10), Keys(5, 15));  // half of it is A's
  EXPECT_EQ(Count(cb.mine), 5u);
  EXPECT_FALSE(cb.mine[0]);
  EXPECT_TRUE(cb.mine[9]);
  ASSERT_EQ(cb.waiting.size(), 1u);
  EXPECT_EQ(cb.waiting[0], ca.flight);
  claims.Stored(cb.flight);
  EXPECT_FALSE(claims.Wait(cb, kStored, Clock::now() + kSoon));  // A still storing
  std::thread t([&] {
    std::this_thread::sleep_for(kSoon);
    claims.Stored(ca.flight);
  });
  EXPECT_TRUE(claims.Wait(cb, kStored, Clock::now() + std::chrono::seconds(30)));
  t.join();
  EXPECT_TRUE(claims.Wait(ca, kStored, Clock::now()));
  EXPECT_EQ(claims.claimed(), 0u);
}

TEST(ImportClaims, AFailedImportFailsThoseWaitingAndItsSpansCanBeClaimedAgain) {
  ImportClaims claims;
  auto [ca, cb] = ReadTogether(claims, Keys(0, 10), Keys(0, 10));
  EXPECT_EQ(Count(cb.mine), 0u);
  claims.Failed(ca.flight);
  claims.Stored(ca.flight);  // too late: it failed
  EXPECT_FALSE(claims.Wait(ca, kStored, Clock::now()));
  EXPECT_FALSE(claims.Wait(cb, kStored, Clock::now()));  // its client sends the page again
  EXPECT_EQ(claims.claimed(), 0u);
  ImportClaims::Claim again = claims.Take(claims.BeginRead(), Keys(0, 10));
  EXPECT_EQ(Count(again.mine), 10u);
  EXPECT_TRUE(again.waiting.empty());
}

TEST(ImportClaims, AnImportMayAnswerOnceWhatItWaitsForIsDurableButTheClaimWaitsForTheStore) {
  ImportClaims claims;
  auto [ca, cb] = ReadTogether(claims, Keys(0, 10), Keys(0, 10));
  EXPECT_FALSE(claims.Wait(cb, kDurable, Clock::now()));
  claims.Durable(ca.flight);
  claims.Failed(ca.flight);  // too late: durable spans will be stored
  EXPECT_TRUE(claims.Wait(cb, kDurable, Clock::now()));
  EXPECT_FALSE(claims.Wait(cb, kStored, Clock::now()));
  EXPECT_FALSE(claims.WaitAllStored(Clock::now() + kSoon));
  // A page sent again meanwhile finds them claimed, though the store lacks them.
  ImportClaims::Claim again = claims.Take(claims.BeginRead(), Keys(0, 10));
  EXPECT_EQ(Count(again.mine), 0u);
  EXPECT_EQ(again.waiting, std::vector<ImportClaims::FlightPtr>{ca.flight});
  claims.Stored(ca.flight);
  EXPECT_TRUE(claims.Wait(cb, kStored, Clock::now()));
  EXPECT_TRUE(claims.WaitAllStored(Clock::now()));
  EXPECT_EQ(claims.claimed(), 0u);
}

TEST(ImportClaims, WaitAllStoredWaitsForTheFlightsTakenBeforeIt) {
  ImportClaims claims;
  EXPECT_TRUE(claims.WaitAllStored(Clock::now()));
  ImportClaims::Claim a = claims.Take(claims.BeginRead(), Keys(0, 5));
  ImportClaims::Claim b = claims.Take(claims.BeginRead(), Keys(5, 10));
  claims.Durable(a.flight);
  claims.Durable(b.flight);
  claims.Stored(b.flight);
  EXPECT_FALSE(claims.WaitAllStored(Clock::now() + kSoon));  // a is not stored yet
  std::thread t([&] {
    std::this_thread::sleep_for(kSoon);
    claims.Stored(a.flight);
  });
  EXPECT_TRUE(claims.WaitAllStored(Clock::now() + std::chrono::seconds(30)));
  t.join();
}

TEST(ImportClaims, ASpanTwiceInOneImportIsClaimedOnce) {
  ImportClaims claims;
  std::vector<query::SpanKey> keys = Keys(0, 3);
  keys.push_back(Key(1));
  ImportClaims::Claim c = claims.Take(claims.BeginRead(), keys);
  EXPECT_EQ(c.mine, (std::vector<bool>{true, true, true, false}));
  EXPECT_TRUE(c.waiting.empty());
  EXPECT_EQ(c.flight->keys.size(), 3u);
}

TEST(ImportClaims, AnImportWithNothingOfItsOwnIsStoredAtOnce) {
  ImportClaims claims;
  ImportClaims::Claim c = claims.Take(claims.BeginRead(), {});
  EXPECT_TRUE(claims.Wait(c, kStored, Clock::now()));
}

TEST(ImportClaims, AbortWakesTheWaiters) {
  ImportClaims claims;
  ImportClaims::Claim c = claims.Take(claims.BeginRead(), Keys(0, 3));
  std::thread t([&] {
    std::this_thread::sleep_for(kSoon);
    claims.Abort();
  });
  EXPECT_FALSE(claims.Wait(c, kStored, Clock::now() + std::chrono::minutes(5)));
  t.join();
  claims.Stored(c.flight);
  EXPECT_FALSE(claims.Wait(c, kStored, Clock::now() + std::chrono::minutes(5)));
}

// A store that counts how often each span was written; a read sees what was
// written before it.
class FakeStore {
 public:
  std::vector<query::SpanKey> Missing(const std::vector<query::SpanKey>& keys) {
    std::lock_guard lock(mu_);
    std::vector<query::SpanKey> out;
    for (const auto& k : keys) {
      if (!written_.contains(k)) out.push_back(k);
    }
    return out;
  }
  void Write(const std::vector<query::SpanKey>& keys) {
    std::lock_guard lock(mu_);
    for (const auto& k : keys) ++written_[k];
  }
  std::map<query::SpanKey, int> written() {
    std::lock_guard lock(mu_);
    return written_;
  }

 private:
  std::mutex mu_;
  std::map<query::SpanKey, int> written_;
};

// Imports of overlapping pages on several threads, as parallel backfills
// sending pages again would. Like the server, an import answers once its
// spans are durable, and a sink thread stores them later; the store is read
// and written after delays, and some appends fail (that page is sent
// again). Returns how many imports found spans of theirs claimed by another
// one not done yet (the race a check of the store alone loses).
int ImportEveryPageOnEveryThread(uint32_t seed) {
  ImportClaims claims;
  FakeStore store;
  constexpr int kThreads = 6;
  constexpr uint32_t kPages = 40;
  constexpr uint32_t kPageSpans = 50;
  std::atomic<int> failures{0};
  std::atomic<int> waited{0};
  auto pause = [](std::mt19937& rng) {
    if (rng() % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
  };
  // The sink: stores what was appended, in order, a little later.
  std::mutex sink_mu;
  std::deque<std::pair<std::vector<query::SpanKey>, ImportClaims::FlightPtr>> appended;
  bool importing = true;
  std::thread sink([&] {
    std::mt19937 rng(seed);
    for (;;) {
      std::vector<query::SpanKey> keys;
      ImportClaims::FlightPtr flight;
      {
        std::lock_guard lock(sink_mu);
        if (appended.empty() && !importing) return;
        if (!appended.empty()) {
          keys = std::move(appended.front().first);
          flight = std::move(appended.front().second);
          appended.pop_front();
        }
      }
      if (flight == nullptr) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      pause(rng);
      store.Write(keys);
      claims.Stored(flight);
    }
  });
  auto import = [&](uint32_t page, std::mt19937& rng) {
    // Pages overlap by half: page p carries spans [p*25, p*25+50).
    const auto keys = Keys(page * kPageSpans / 2, page * kPageSpans / 2 + kPageSpans);
    for (;;) {
      ImportClaims::Read r = claims.BeginRead();
      pause(rng);
      const auto missing = store.Missing(keys);
      pause(rng);
      ImportClaims::Claim c = claims.Take(std::move(r), missing);
      std::vector<query::SpanKey> mine;
      for (size_t i = 0; i < missing.size(); ++i) {
        if (c.mine[i]) mine.push_back(missing[i]);
      }
      if (!c.waiting.empty()) ++waited;
      pause(rng);
      if (rng() % 10 == 0) {
        ++failures;
        claims.Failed(c.flight);
      } else if (!mine.empty()) {
        claims.Durable(c.flight);
        std::lock_guard lock(sink_mu);
        appended.emplace_back(std::move(mine), c.flight);
      }
      if (claims.Wait(c, kDurable, Clock::now() + std::chrono::seconds(60))) return;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(seed + static_cast<uint32_t>(t) * 7919u);
      // Every thread sends every page (in its own order): each page is in
      // flight on several threads at once.
      std::vector<uint32_t> order;
      for (uint32_t p = 0; p < kPages; ++p) order.push_back(p);
      std::shuffle(order.begin(), order.end(), rng);
      for (uint32_t p : order) import(p, rng);
    });
  }
  for (auto& t : threads) t.join();
  {
    std::lock_guard lock(sink_mu);
    importing = false;
  }
  sink.join();
  EXPECT_TRUE(claims.WaitAllStored(Clock::now()));
  const auto written = store.written();
  EXPECT_EQ(written.size(), kPages * kPageSpans / 2 + kPageSpans / 2);
  int twice = 0;
  for (const auto& [k, n] : written) twice += n > 1 ? 1 : 0;
  EXPECT_EQ(twice, 0) << "spans written twice, of " << written.size();
  EXPECT_GT(failures.load(), 0);
  EXPECT_EQ(claims.claimed(), 0u);
  return waited.load();
}

TEST(ImportClaims, ConcurrentImportsOfTheSamePagesStoreEachSpanOnce) {
  // Rounds until one had the race to lose (the first, almost always).
  int waited = 0;
  for (uint32_t round = 0; round < 20 && waited == 0 && !HasFailure(); ++round) {
    waited = ImportEveryPageOnEveryThread(round * 1000 + 1);
  }
  EXPECT_GT(waited, 0);
}

}  // namespace
}  // namespace spanhouse::server
