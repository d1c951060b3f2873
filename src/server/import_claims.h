// Which spans the imports in flight are storing (POST /api/admin/import),
// so that several imports may run at once and a span is still stored once,
// even when two imports carrying it run together (a page sent again after a
// resume while its first send is still being stored).
//
// An import reads the store for the spans it carries, then claims those the
// store lacks. A span another import claimed is left to that one: the
// import's answer waits until that one has them in the durable queue (and
// fails if it fails, so that its client sends the page again). A claim is
// held until the spans are stored, and then until no import that began its
// read of the store before they were stored is still between its read and
// its claim: every later read finds them in the store. Reads are numbered
// for that (BeginRead).
//
//   Read r = claims.BeginRead();
//   ... read the store: `candidates`, the spans it lacks ...
//   Claim c = claims.Take(std::move(r), candidates);  // c.mine[i]: this import stores it
//   ... append them to the durable queue: Durable(c.flight) or Failed(c.flight);
//       once the sinks stored them: Stored(c.flight) (from any thread) ...
//   claims.Wait(c, Stage::kDurable, deadline);  // every candidate durable, by this or another
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "query/span_reader.h"

namespace spanhouse::server {

class ImportClaims {
 public:
  // How far an import's spans have come. kFailed: not appended, never will be.
  enum class Stage { kClaimed, kDurable, kStored, kFailed };

  // One import's claimed spans.
  struct Flight {
    uint64_t number = 0;  // in the order of Take
    Stage stage = Stage::kClaimed;
    uint64_t stored_after_read = 0;  // the last read begun when they were stored
    std::vector<query::SpanKey> keys;
  };
  using FlightPtr = std::shared_ptr<Flight>;

  // An import between the start of its read of the store and its claim; a
  // Read dropped without Take() (the read failed) just ends.
  class Read {
   public:
    Read() = default;
    Read(Read&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), number_(o.number_) {}
    Read& operator=(Read&&) = delete;
    Read(const Read&) = delete;
    ~Read();

   private:
    friend class ImportClaims;
    Read(ImportClaims* owner, uint64_t number) : owner_(owner), number_(number) {}
    ImportClaims* owner_ = nullptr;
    uint64_t number_ = 0;
  };

  struct Claim {
    FlightPtr flight;                // this import's: the candidates it stores (maybe none)
    std::vector<bool> mine;          // per candidate: stored by this import
    std::vector<FlightPtr> waiting;  // other imports storing the other candidates
  };

  // Before reading the store.
  Read BeginRead();
  // After it: `candidates` are the spans the read did not find. A span twice
  // among them is claimed once. A claim with none of its own is stored.
  Claim Take(Read read, const std::vector<query::SpanKey>& candidates);
  // The flight's spans are in the durable queue: they will be stored.
  void Durable(const FlightPtr& flight);
  // They are stored (after Durable, or without a log).
  void Stored(const FlightPtr& flight);
  // They were not appended: the claims go at once, and imports waiting for
  // them fail. Nothing once durable.
  void Failed(const FlightPtr& flight);

  // Waits until the claim's own flight and those it waits for reached
  // `stage` (kDurable or kStored). True when they did; false when one
  // failed, at `deadline`, or once Abort() was called.
  bool Wait(const Claim& claim, Stage stage, std::chrono::steady_clock::time_point deadline);
  // Waits until every flight taken so far is stored (or failed). False at
  // `deadline` or on Abort().
  bool WaitAllStored(std::chrono::steady_clock::time_point deadline);
  // Wakes every waiter (false) and makes later waits fail at once: shutting down.
  void Abort();

  // Spans claimed now (stored ones included until they are let go).
  size_t claimed() const;

 private:
  void EndRead(uint64_t number);
  void Advance(const FlightPtr& flight, Stage to);
  void LetGoLocked();  // drops the claims of stored flights no read in progress may miss

  struct KeyHash {
    size_t operator()(const query::SpanKey& k) const;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t reads_ = 0;            // reads begun
  uint64_t flights_ = 0;          // flights taken
  std::set<uint64_t> reading_;    // reads between BeginRead and Take
  std::set<uint64_t> unstored_;   // flights neither stored nor failed
  std::deque<FlightPtr> stored_;  // by stored_after_read; their claims still held
  std::unordered_map<query::SpanKey, FlightPtr, KeyHash> claims_;
  bool aborted_ = false;
};

}  // namespace spanhouse::server
