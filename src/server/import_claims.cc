#include "server/import_claims.h"

#include <algorithm>
#include <cstring>

namespace spanhouse::server {

size_t ImportClaims::KeyHash::operator()(const query::SpanKey& k) const {
  uint64_t span = 0;
  std::memcpy(&span, k.span_id.data(), 8);
  return TraceIdHash()(k.trace_id) ^ static_cast<size_t>(span * 0xC2B2AE3D27D4EB4Full);
}

ImportClaims::Read::~Read() {
  if (owner_ != nullptr) owner_->EndRead(number_);
}

ImportClaims::Read ImportClaims::BeginRead() {
  std::lock_guard lock(mu_);
  const uint64_t n = ++reads_;
  reading_.insert(n);
  return Read(this, n);
}

void ImportClaims::EndRead(uint64_t number) {
  std::lock_guard lock(mu_);
  reading_.erase(number);
  LetGoLocked();
}

ImportClaims::Claim ImportClaims::Take(Read read, const std::vector<query::SpanKey>& candidates) {
  Claim c;
  c.flight = std::make_shared<Flight>();
  c.mine.assign(candidates.size(), false);
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto [it, fresh] = claims_.try_emplace(candidates[i], c.flight);
    if (fresh) {
      c.mine[i] = true;
      c.flight->keys.push_back(candidates[i]);
    } else if (it->second != c.flight && it->second->stage != Stage::kStored &&
               std::find(c.waiting.begin(), c.waiting.end(), it->second) == c.waiting.end()) {
      c.waiting.push_back(it->second);  // a stored one: nothing to wait for
    }
  }
  c.flight->number = ++flights_;
  if (c.flight->keys.empty()) {
    c.flight->stage = Stage::kStored;  // nothing of its own
  } else {
    unstored_.insert(c.flight->number);
  }
  // The read ends after the claim: until then, no claim it may need is let go.
  if (std::exchange(read.owner_, nullptr) != nullptr) reading_.erase(read.number_);
  LetGoLocked();
  return c;
}

void ImportClaims::Durable(const FlightPtr& flight) {
  Advance(flight, Stage::kDurable);
}
void ImportClaims::Stored(const FlightPtr& flight) {
  Advance(flight, Stage::kStored);
}
void ImportClaims::Failed(const FlightPtr& flight) {
  Advance(flight, Stage::kFailed);
}

void ImportClaims::Advance(const FlightPtr& flight, Stage to) {
  {
    std::lock_guard lock(mu_);
    const Stage from = flight->stage;
    // Forward only; a failure only before the spans were durable.
    if (from == Stage::kStored || from == Stage::kFailed || from >= to ||
        (to == Stage::kFailed && from != Stage::kClaimed)) {
      return;
    }
    flight->stage = to;
    if (to == Stage::kStored) {
      flight->stored_after_read = reads_;
      stored_.push_back(flight);
    } else if (to == Stage::kFailed) {
      for (const query::SpanKey& k : flight->keys) {
        auto it = claims_.find(k);
        if (it != claims_.end() && it->second == flight) claims_.erase(it);
      }
    }
    if (to == Stage::kStored || to == Stage::kFailed) unstored_.erase(flight->number);
    LetGoLocked();
  }
  cv_.notify_all();
}

void ImportClaims::LetGoLocked() {
  // A read numbered after a flight's stored_after_read began once its spans
  // were stored, and finds them; an earlier one still reading may not.
  while (!stored_.empty() &&
         (reading_.empty() || *reading_.begin() > stored_.front()->stored_after_read)) {
    const FlightPtr f = std::move(stored_.front());
    stored_.pop_front();
    for (const query::SpanKey& k : f->keys) {
      auto it = claims_.find(k);
      if (it != claims_.end() && it->second == f) claims_.erase(it);
    }
  }
}

bool ImportClaims::Wait(const Claim& claim, Stage stage,
                        std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  // A flight is settled once it reached `stage` or failed.
  auto settled = [&](const FlightPtr& f) { return f->stage >= stage; };
  const bool done = cv_.wait_until(lock, deadline, [&] {
    return aborted_ || (settled(claim.flight) &&
                        std::all_of(claim.waiting.begin(), claim.waiting.end(), settled));
  });
  if (!done || aborted_) return false;
  auto failed = [](const FlightPtr& f) { return f->stage == Stage::kFailed; };
  return !failed(claim.flight) && std::none_of(claim.waiting.begin(), claim.waiting.end(), failed);
}

bool ImportClaims::WaitAllStored(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  const uint64_t upto = flights_;
  const bool done = cv_.wait_until(
      lock, deadline, [&] { return aborted_ || unstored_.empty() || *unstored_.begin() > upto; });
  return done && !aborted_;
}

void ImportClaims::Abort() {
  {
    std::lock_guard lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

size_t ImportClaims::claimed() const {
  std::lock_guard lock(mu_);
  return claims_.size();
}

}  // namespace spanhouse::server
