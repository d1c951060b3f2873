// The sink runtime with a fake store: what every sink gets from it (retry,
// the dead letter, the drain, the replay of a sealed block, the sharding by
// trace id, acknowledgements) checked once here.
#include "sink/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sink/retry.h"
#include "sink/sharded_queue.h"
#include "testdata/sample_batch.h"

namespace spanhouse::sink {
namespace {

using namespace std::chrono_literals;

// Issues tickets and counts how often each record was acknowledged.
class FakeIssuer final : public TicketIssuer {
 public:
  Ticket Issue(uint64_t lsn) { return Make(this, lsn, lsn, 0, false); }
  int acks(uint64_t lsn) {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_[lsn];
  }
  ~FakeIssuer() = default;

 private:
  Ticket Reclaim(uint64_t segment, uint64_t lsn, uint64_t offset, bool keep) override {
    std::lock_guard<std::mutex> lock(mu_);
    --acks_[lsn];  // one more claim to give up before the record is done
    return Make(this, segment, lsn, offset, keep);
  }
  void Release(uint64_t segment, bool /*keep*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++acks_[segment];  // segment == lsn here
  }
  std::mutex mu_;
  std::map<uint64_t, int> acks_;
};

// Seals blocks with tokens "token-<n>" and records what is done.
class FakeLedger final : public BlockLedger {
 public:
  SealedBlock Seal(std::string_view key, const std::vector<Ticket>& tickets,
                   uint32_t chunks) override {
    std::lock_guard<std::mutex> lock(mu_);
    seals.push_back({std::string(key), tickets.size(), chunks});
    SealedBlock b;
    b.lsn = 1000 + seals.size();
    b.token = "token-" + std::to_string(seals.size());
    return b;
  }
  void Done(const SealedBlock& block, std::vector<Ticket>* tickets) override {
    std::lock_guard<std::mutex> lock(mu_);
    done.push_back(block.lsn);
    for (auto& t : *tickets) t.Ack();
    tickets->clear();
  }
  double OldestWaitingSeconds() override { return 0; }
  struct SealCall {
    std::string key;
    size_t tickets;
    uint32_t chunks;
  };
  std::mutex mu_;
  std::vector<SealCall> seals;
  std::vector<uint64_t> done;  // the sealed LSN of each block done (0: unsealed)
};

struct FakeWrite : Write {
  std::vector<TraceId> traces;
};

// A store whose writes answer what the test's script says.
class FakePlugin final : public Plugin {
 public:
  explicit FakePlugin(size_t shards = 1, bool seals = true) : shards_(shards), seals_(seals) {}
  // Of each write's spans, this many stored otherwise (Write::other_rows),
  // and stored by the failed attempts of a write dead-lettered (Write::stored).
  size_t other_rows = 0;
  size_t stored_before_refusal = 0;
  size_t shards() const override { return shards_; }
  // Each item a write of its own, sealed under "key".
  void Add(size_t shard, QueuedBatch item) override {
    auto w = std::make_unique<FakeWrite>();
    w->since = std::chrono::steady_clock::now();
    w->rows = Rows(item) - other_rows;
    w->other_rows = other_rows;
    if (seals_) w->key = "key";
    if (item.batch != nullptr) {
      w->traces = item.batch->spans.trace_id;
    }
    if (item.ticket.valid()) w->tickets.push_back(std::move(item.ticket));
    if (item.block != nullptr) {
      w->sealed = item.block->sealed;
      for (auto& t : item.block->tickets) w->tickets.push_back(std::move(t));
    }
    std::lock_guard<std::mutex> lock(mu);
    ready_[shard].push_back(std::move(w));
  }
  void TakeDue(size_t shard, bool, bool, std::vector<std::unique_ptr<Write>>* out) override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& w : ready_[shard]) out->push_back(std::move(w));
    ready_[shard].clear();
  }
  Status WriteOnce(size_t shard, Write& w) override {
    int n;
    {
      std::lock_guard<std::mutex> lock(mu);
      n = ++attempts;
      tokens.push_back(w.sealed.token);
      for (const TraceId& t : static_cast<FakeWrite&>(w).traces) shard_of[t].insert(shard);
    }
    return script(n);
  }
  Failure Classify(const Status& st) const override {
    switch (st.code()) {
      case StatusCode::kUnavailable:
        return Failure::kRetryable;
      case StatusCode::kInvalidArgument:
        return Failure::kPermanent;
      default:
        return Failure::kUnknown;
    }
  }
  Status DeadLetter(size_t, Write& w, const Status& why) override {
    std::lock_guard<std::mutex> lock(mu);
    dead_lettered += w.rows + w.other_rows - stored_before_refusal;
    w.stored = stored_before_refusal;
    return dead_letter_fails ? Status::Internal("disk full") : Status::Ok();
  }

  std::function<Status(int attempt)> script = [](int) { return Status::Ok(); };
  bool dead_letter_fails = false;
  std::mutex mu;
  int attempts = 0;
  std::vector<std::string> tokens;
  std::map<TraceId, std::set<size_t>> shard_of;
  size_t dead_lettered = 0;

 private:
  const size_t shards_;
  const bool seals_;
  std::map<size_t, std::vector<std::unique_ptr<Write>>> ready_;
};

template <typename F>
bool WaitUntil(F&& pred) {
  for (int i = 0; i < 3000 && !pred(); ++i) std::this_thread::sleep_for(10ms);  // ~30 s at most
  return pred();
}

RuntimeOptions FastRetries() {
  RuntimeOptions o;
  o.name = "fake";
  o.retry.backoff_min = 1ms;
  o.retry.backoff_max = 4ms;
  o.retry.unknown_attempts = 3;
  o.retry.drain_timeout = 2000ms;
  return o;
}

QueuedBatch Request(FakeIssuer& issuer, uint64_t lsn, uint8_t trace_seed = 0) {
  QueuedBatch q;
  q.batch = std::make_unique<SpanBatch>(testdata::SampleBatch(1));
  for (auto& id : q.batch->spans.trace_id) id[15] = static_cast<uint8_t>(id[15] ^ trace_seed);
  q.ticket = issuer.Issue(lsn);
  return q;
}

struct Harness {
  explicit Harness(std::unique_ptr<FakePlugin> p, RuntimeOptions o = FastRetries())
      : plugin(p.get()), sink(std::move(p), std::move(o)) {
    sink.Attach(ledger);
    EXPECT_TRUE(sink.Start().ok());
  }
  FakeIssuer issuer;
  FakeLedger ledger;
  FakePlugin* plugin;
  RuntimeSink sink;
};

TEST(SinkRuntime, RetriesAFailingWriteWithItsTokenUntilStored) {
  auto p = std::make_unique<FakePlugin>();
  p->script = [](int n) { return n <= 2 ? Status::Unavailable("busy") : Status::Ok(); };
  Harness h(std::move(p));
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_EQ(h.plugin->attempts, 3);
  // Sealed once, before the first attempt; every attempt carries its token.
  ASSERT_EQ(h.ledger.seals.size(), 1u);
  EXPECT_EQ(h.ledger.seals[0].key, "key");
  EXPECT_EQ(h.plugin->tokens, (std::vector<std::string>{"token-1", "token-1", "token-1"}));
  EXPECT_EQ(h.ledger.done, (std::vector<uint64_t>{1001}));
  EXPECT_EQ(h.issuer.acks(1), 1);
  const SinkStats& s = h.sink.stats();
  EXPECT_EQ(s.rows_written.load(), 3u);
  EXPECT_EQ(s.writes.load(), 1u);
  EXPECT_EQ(s.write_errors.load(), 2u);
  EXPECT_EQ(s.retryable_errors.load(), 2u);
  EXPECT_EQ(s.pending_rows.load(), 0u);
}

TEST(SinkRuntime, APermanentFailureGoesToTheDeadLetterAtOnce) {
  auto p = std::make_unique<FakePlugin>();
  p->script = [](int) { return Status::Invalid("type mismatch"); };
  Harness h(std::move(p));
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_EQ(h.plugin->attempts, 1);
  EXPECT_EQ(h.plugin->dead_lettered, 3u);
  EXPECT_EQ(h.issuer.acks(1), 1);  // done with: it is kept in the dead letter
  const SinkStats& s = h.sink.stats();
  EXPECT_EQ(s.rows_dead_lettered.load(), 3u);
  EXPECT_EQ(s.blocks_dead_lettered.load(), 1u);
  EXPECT_EQ(s.permanent_errors.load(), 1u);
  EXPECT_EQ(s.rows_written.load(), 0u);
}

// Spans a write stores otherwise (a ClickHouse sink's sampled-out spans)
// leave the pending count but are not written spans; of a write refused for
// good after storing part of it, that part counts as written.
TEST(SinkRuntime, RowsStoredOtherwiseOrBeforeARefusalAreCountedApart) {
  auto p = std::make_unique<FakePlugin>();
  p->other_rows = 1;
  Harness h(std::move(p));
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  EXPECT_TRUE(WaitUntil([&] { return h.issuer.acks(1) == 1; }));
  EXPECT_EQ(h.sink.stats().rows_written.load(), 2u);
  EXPECT_EQ(h.sink.stats().pending_rows.load(), 0u);
  h.plugin->stored_before_refusal = 1;
  h.plugin->script = [](int) { return Status::Invalid("the sampled rows refused"); };
  QueuedBatch r = Request(h.issuer, 2);
  ASSERT_TRUE(h.sink.Push(r).ok());
  h.sink.Drain();
  EXPECT_EQ(h.issuer.acks(2), 1);
  const SinkStats& s = h.sink.stats();
  EXPECT_EQ(s.rows_written.load(), 3u);        // 2, then the 1 stored before the refusal
  EXPECT_EQ(s.rows_dead_lettered.load(), 2u);  // the rest of the second write
  EXPECT_EQ(s.pending_rows.load(), 0u);
}

TEST(SinkRuntime, AnUnknownFailureIsRetriedABoundedNumberOfTimes) {
  auto p = std::make_unique<FakePlugin>();
  p->script = [](int) { return Status::Internal("Code: 9999. what is this"); };
  Harness h(std::move(p));
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_EQ(h.plugin->attempts, 3);  // unknown_attempts
  EXPECT_EQ(h.plugin->dead_lettered, 3u);
  EXPECT_EQ(h.issuer.acks(1), 1);
}

TEST(SinkRuntime, ADeadLetterThatCannotBeWrittenLeavesTheRecordsQueued) {
  auto p = std::make_unique<FakePlugin>();
  p->script = [](int) { return Status::Invalid("refused"); };
  p->dead_letter_fails = true;
  Harness h(std::move(p));
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_EQ(h.issuer.acks(1), 0);  // the next start writes it again
  EXPECT_TRUE(h.ledger.done.empty());
  EXPECT_EQ(h.sink.stats().rows_left_queued.load(), 3u);
  EXPECT_EQ(h.sink.stats().rows_dead_lettered.load(), 0u);
}

TEST(SinkRuntime, DrainWritesWhatIsQueuedThenStops) {
  auto p = std::make_unique<FakePlugin>(4);
  Harness h(std::move(p));
  for (uint64_t lsn = 1; lsn <= 50; ++lsn) {
    QueuedBatch q = Request(h.issuer, lsn, static_cast<uint8_t>(lsn));
    ASSERT_TRUE(h.sink.Push(q).ok());
  }
  h.sink.Drain();
  for (uint64_t lsn = 1; lsn <= 50; ++lsn) EXPECT_EQ(h.issuer.acks(lsn), 1) << lsn;
  EXPECT_EQ(h.sink.stats().rows_written.load(), 150u);
  // Pushed after the drain: refused, not lost.
  QueuedBatch late = Request(h.issuer, 51);
  EXPECT_EQ(h.sink.Push(late).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(late.ticket.valid());
}

TEST(SinkRuntime, AStoreStillFailingAtTheDrainDeadlineKeepsItsRecords) {
  auto p = std::make_unique<FakePlugin>();
  p->script = [](int) { return Status::Unavailable("down"); };
  RuntimeOptions o = FastRetries();
  o.retry.drain_timeout = 50ms;
  o.retry.stopping_attempts = std::numeric_limits<int>::max();  // only the deadline stops it
  Harness h(std::move(p), o);
  for (uint64_t lsn = 1; lsn <= 3; ++lsn) {
    QueuedBatch q = Request(h.issuer, lsn, static_cast<uint8_t>(lsn));
    ASSERT_TRUE(h.sink.Push(q).ok());
  }
  h.sink.Drain();  // returns: nothing retries past the deadline
  for (uint64_t lsn = 1; lsn <= 3; ++lsn) EXPECT_EQ(h.issuer.acks(lsn), 0) << lsn;
  EXPECT_EQ(h.sink.stats().rows_left_queued.load(), 9u);
  EXPECT_EQ(h.sink.stats().rows_lost.load(), 0u);
  EXPECT_EQ(h.sink.stats().pending_rows.load(), 0u);
}

TEST(SinkRuntime, StoppingGivesUpAfterBoundedAttempts) {
  auto p = std::make_unique<FakePlugin>();
  p->script = [](int) { return Status::Unavailable("down"); };
  RuntimeOptions o = FastRetries();
  o.retry.stopping_attempts = 4;
  o.retry.drain_timeout = std::chrono::hours(1);
  Harness h(std::move(p), o);
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_GE(h.plugin->attempts, 4);
  EXPECT_EQ(h.issuer.acks(1), 0);
  EXPECT_EQ(h.sink.stats().rows_left_queued.load(), 3u);
}

TEST(SinkRuntime, AReplayedBlockIsWrittenWithItsOwnTokenAndFinished) {
  Harness h(std::make_unique<FakePlugin>());
  QueuedBatch q;
  q.block = std::make_unique<ReplayBlock>();
  q.block->key = "key";
  q.block->sealed.lsn = 77;
  q.block->sealed.token = "sealed-before-the-crash";
  q.block->parts.push_back(std::make_unique<SpanBatch>(testdata::SampleBatch(1)));
  q.block->tickets.push_back(h.issuer.Issue(5));
  q.block->tickets.push_back(h.issuer.Issue(6));
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_TRUE(h.ledger.seals.empty());  // not sealed again
  EXPECT_EQ(h.plugin->tokens, (std::vector<std::string>{"sealed-before-the-crash"}));
  EXPECT_EQ(h.ledger.done, (std::vector<uint64_t>{77}));
  EXPECT_EQ(h.issuer.acks(5), 1);
  EXPECT_EQ(h.issuer.acks(6), 1);
  EXPECT_EQ(h.sink.stats().rows_written.load(), 3u);
}

TEST(SinkRuntime, AStoreIdempotentByContentIsNeverSealed) {
  Harness h(std::make_unique<FakePlugin>(1, /*seals=*/false));
  QueuedBatch q = Request(h.issuer, 1);
  ASSERT_TRUE(h.sink.Push(q).ok());
  h.sink.Drain();
  EXPECT_TRUE(h.ledger.seals.empty());
  EXPECT_EQ(h.plugin->tokens, (std::vector<std::string>{""}));
  EXPECT_EQ(h.ledger.done, (std::vector<uint64_t>{0}));
  EXPECT_EQ(h.issuer.acks(1), 1);
}

TEST(SinkRuntime, EveryTraceIsWrittenByTheShardItsIdFallsIn) {
  Harness h(std::make_unique<FakePlugin>(4));
  for (uint64_t lsn = 1; lsn <= 40; ++lsn) {
    QueuedBatch q = Request(h.issuer, lsn, static_cast<uint8_t>(lsn * 7));
    ASSERT_TRUE(h.sink.Push(q).ok());
  }
  h.sink.Drain();
  ASSERT_FALSE(h.plugin->shard_of.empty());
  std::set<size_t> used;
  for (const auto& [trace, shards] : h.plugin->shard_of) {
    ASSERT_EQ(shards.size(), 1u);
    EXPECT_EQ(*shards.begin(), ShardOf(trace, 4));
    used.insert(*shards.begin());
  }
  EXPECT_GT(used.size(), 1u);  // spread over the shards
}

TEST(SinkRuntime, AFullQueueRefusesAndLeavesTheItemAsItWas) {
  auto p = std::make_unique<FakePlugin>();
  std::atomic<bool> open{false};
  p->script = [&](int) {
    while (!open.load()) std::this_thread::sleep_for(1ms);
    return Status::Ok();
  };
  RuntimeOptions o = FastRetries();
  o.queue_bytes = 1;  // one item at a time
  Harness h(std::move(p), o);
  Status st;
  uint64_t lsn = 0;
  // The writer holds one write, one waits for it, the encoder blocks on
  // the next, the queue takes one more: then it is full.
  for (lsn = 1; lsn <= 100; ++lsn) {
    QueuedBatch q = Request(h.issuer, lsn, static_cast<uint8_t>(lsn));
    q.reservation = Reservation();
    st = h.sink.Push(q);
    if (!st.ok()) {
      EXPECT_TRUE(q.ticket.valid());
      EXPECT_NE(q.batch, nullptr);
      break;
    }
  }
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  open = true;
  h.sink.Drain();
  for (uint64_t i = 1; i < lsn; ++i) EXPECT_EQ(h.issuer.acks(i), 1) << i;
}

// A request whose traces fall in several shards is taken whole or refused
// whole when the sink is full, never split (a part taken and a part refused
// would leave its record neither queued nor in the backlog).
TEST(SinkRuntime, AFullSinkRefusesARequestOverSeveralShardsWhole) {
  std::atomic<bool> open{false};
  const size_t one = testdata::SampleBatch(1).MemoryBytes();
  RuntimeOptions small = FastRetries();
  small.queue_bytes = 3 * one * 16;
  auto p2 = std::make_unique<FakePlugin>(4);
  p2->script = [&](int) {
    while (!open.load()) std::this_thread::sleep_for(1ms);
    return Status::Ok();
  };
  Harness full(std::move(p2), small);
  int refused = 0;
  for (uint64_t lsn = 1; lsn <= 200 && refused < 5; ++lsn) {
    // Sixteen traces in one request: spread over the four shards.
    QueuedBatch q;
    q.batch = std::make_unique<SpanBatch>();
    for (uint8_t t = 0; t < 16; ++t) {
      SpanBatch one_trace = testdata::SampleBatch(1);
      for (auto& id : one_trace.spans.trace_id) id[15] = static_cast<uint8_t>(lsn * 16 + t);
      q.batch->Append(one_trace);
    }
    q.ticket = full.issuer.Issue(lsn);
    const Status st = full.sink.Push(q);
    if (st.ok()) continue;
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.message();
    EXPECT_TRUE(q.ticket.valid());
    ASSERT_NE(q.batch, nullptr);
    EXPECT_EQ(q.batch->span_count(), 48u);
    ++refused;
  }
  EXPECT_GT(refused, 0);
  open = true;
  full.sink.Drain();
}

TEST(Backoff, DoublesUpToItsMaximumWithJitter) {
  Backoff b(100ms, 800ms);
  const std::chrono::milliseconds steps[] = {100ms, 200ms, 400ms, 800ms, 800ms, 800ms};
  for (auto step : steps) {
    const auto wait = b.Next();
    EXPECT_GE(wait, step / 2);
    EXPECT_LE(wait, step);
  }
}

}  // namespace
}  // namespace spanhouse::sink
