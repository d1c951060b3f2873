// A ticket: one consumer's claim on one accepted request's record in the
// durable queue. A sink acknowledges (Ack) each ticket it is handed once the
// request's spans are stored or dead-lettered; until then the record stays on
// disk and a restart hands it over again. Destroyed without Ack, the claim is
// never given up in this process: the safe default after a give-up.
//
// The queue that issues tickets implements TicketIssuer, so a sink knows
// tickets without knowing the queue.
#pragma once

#include <cstdint>
#include <utility>

namespace spanhouse::sink {

class Ticket;

// What issues tickets (the durable queue's log): takes and gives up claims.
class TicketIssuer {
 protected:
  ~TicketIssuer() = default;
  // Another claim (or, `keep`, a keep) on the same record.
  virtual Ticket Reclaim(uint64_t segment, uint64_t lsn, uint64_t offset, bool keep) = 0;
  virtual void Release(uint64_t segment, bool keep) = 0;
  // For the issuer: a ticket and what it names.
  static Ticket Make(TicketIssuer* issuer, uint64_t segment, uint64_t lsn, uint64_t offset,
                     bool keep);
  static uint64_t SegmentOf(const Ticket& t);
  static uint64_t OffsetOf(const Ticket& t);
  static const TicketIssuer* IssuerOf(const Ticket& t);
  friend class Ticket;
};

class Ticket {
 public:
  Ticket() = default;
  Ticket(Ticket&& o) noexcept
      : issuer_(std::exchange(o.issuer_, nullptr)),
        segment_(o.segment_),
        lsn_(o.lsn_),
        offset_(o.offset_),
        keep_(o.keep_) {}
  Ticket& operator=(Ticket&& o) noexcept {
    issuer_ = std::exchange(o.issuer_, nullptr);
    segment_ = o.segment_;
    lsn_ = o.lsn_;
    offset_ = o.offset_;
    keep_ = o.keep_;
    return *this;
  }
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

  // Another claim on the same record (an empty ticket for an empty one).
  Ticket Clone() const {
    return issuer_ == nullptr ? Ticket() : issuer_->Reclaim(segment_, lsn_, offset_, keep_);
  }
  // A keep on the same record (none for an empty ticket): the record stays
  // readable after every consumer is done with it, until the keep's Ack().
  // A keep holds back no consumer's claim.
  Ticket Keep() const {
    return issuer_ == nullptr ? Ticket() : issuer_->Reclaim(segment_, lsn_, offset_, true);
  }
  void Ack() {
    if (issuer_ == nullptr) return;
    std::exchange(issuer_, nullptr)->Release(segment_, keep_);
  }
  bool valid() const { return issuer_ != nullptr; }
  // The record's log sequence number (0: none).
  uint64_t lsn() const { return lsn_; }

 private:
  friend class TicketIssuer;
  Ticket(TicketIssuer* issuer, uint64_t segment, uint64_t lsn, uint64_t offset, bool keep)
      : issuer_(issuer), segment_(segment), lsn_(lsn), offset_(offset), keep_(keep) {}
  TicketIssuer* issuer_ = nullptr;
  uint64_t segment_ = 0;
  uint64_t lsn_ = 0;
  uint64_t offset_ = 0;  // where the record starts in its segment; 0: unknown
  bool keep_ = false;    // a keep, not a consumer's claim
};

inline Ticket TicketIssuer::Make(TicketIssuer* issuer, uint64_t segment, uint64_t lsn,
                                 uint64_t offset, bool keep) {
  return Ticket(issuer, segment, lsn, offset, keep);
}
inline uint64_t TicketIssuer::SegmentOf(const Ticket& t) {
  return t.segment_;
}
inline uint64_t TicketIssuer::OffsetOf(const Ticket& t) {
  return t.offset_;
}
inline const TicketIssuer* TicketIssuer::IssuerOf(const Ticket& t) {
  return t.issuer_;
}

}  // namespace spanhouse::sink
