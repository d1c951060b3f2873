// The payloads of the durable queue's records (segment_log.h: RecordKind),
// little-endian. Read by the queue alone: receivers append requests, sinks
// seal and acknowledge blocks, through DurableQueue and SinkCursor.
//
// A request (kEncodedRequest): u64 receive time (Unix ns), u8 BodyFormat,
//   then the body after any Content-Encoding: a protobuf body (OTLP or
//   Zipkin) as it came, a JSON one as OTLP protobuf encoded from the decoded
//   batch (smaller). Read back, the spans are filtered again against the
//   receive time, so the same spans are dropped as when the client was
//   answered, however late the read. Older logs: kRequest (u64 receive
//   time, then OTLP protobuf) and kSpans (OTLP protobuf, not filtered).
//
// A request for some sinks only (kTargetedRequest): spans imported from
//   another store, for the sinks named (the ClickHouse store, not the store
//   they came from). u64 receive time, u8 BodyFormat, u8 n, n times u8 k +
//   a sink's name, then the body. Read back, they are not filtered or
//   sampled again: an import takes spans as they were stored.
//
// A request when several nodes act as one system (kViewedRequest): u64
//   receive time, u8 BodyFormat, u64 view (SpanBatch::peer_view: the nodes up
//   when it came, by which every reading hands each span to the same node),
//   then the body. Read back as kEncodedRequest is, the view on the batch.
//
// Tail sampling's decisions (kTailDecisions): payload of TailSampler
//   (u32 n, then n times the 16-byte trace id, i8 policy or -1, u8 flags);
//   loaded at start before any record is read back.
//
// A sealed block (kKeyedBlock): which records' spans one write of one sink
//   holds, logged (synced) before the write, so that after a crash the block
//   can be formed again and written with the same deduplication token:
//   stored once whether or not the first attempt reached the store.
//   u8 n + the sink's name, u8 k + the sink's key (opaque here: the sink
//   says which of a record's spans the key holds, Sink::BlockMembers), u32 n,
//   n u64 LSNs of request records, u32 chunks: how many pieces the write read
//   (the engine's deduplication id of an INSERT ... SELECT depends on the
//   token and on the number of blocks it read, measured on chDB 26.5, so a
//   replay reads as many). Older logs: kSinkBlock, the same with the embedded
//   ClickHouse sink's 12-byte key in place of u8 k + key and chunks absent
//   when 1; kBlock, the same without the name, of "chdb".
//
// An acknowledgement (kSinkAck): the sink stored (or dead-lettered) these
//   sealed blocks: a replay skips them. u8 n + the sink's name, u32 n, n
//   u64 LSNs of kSinkBlock records. Not synced: a lost one only means its
//   blocks are written again with their tokens. kReplayed, older logs: the
//   same for "chdb" (blocks stored before a schema upgrade's copy).
//
// A block record lies after the records it names and an ack after its
// blocks; segments go oldest first, so each outlives what it names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/body.h"
#include "common/status.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/filter/span_filter.h"

namespace spanhouse::pipeline::durable {

inline void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
inline uint64_t GetLe(std::string_view p, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[off + i]);
  return v;
}

inline constexpr size_t kRequestHeadBytes = 8;         // kRequest
inline constexpr size_t kEncodedRequestHeadBytes = 9;  // kEncodedRequest
inline constexpr size_t kViewedRequestHeadBytes = 17;  // kViewedRequest

inline std::string EncodedRequestHead(uint64_t received_ns, codec::BodyFormat format) {
  std::string head;
  PutLe(&head, received_ns, 8);
  head.push_back(static_cast<char>(format));
  return head;
}

// The head of a kTargetedRequest: EncodedRequestHead's, then the sinks'
// names (each at most 255 bytes, at most 255 of them).
std::string TargetedRequestHead(uint64_t received_ns, codec::BodyFormat format,
                                const std::vector<std::string>& sinks);
// The sinks a request record is for, into `sinks`: false for a record for
// every sink (or not a request record). A kTargetedRequest whose head is
// broken names none.
bool RequestTargets(RecordKind kind, std::string_view payload, std::vector<std::string>* sinks);

struct BlockRecord {
  std::string sink;
  std::string key;  // the sink's (at most 255 bytes)
  std::vector<uint64_t> lsns;
  uint32_t chunks = 1;

  // A kKeyedBlock payload.
  std::string Encode() const;
  // A payload of kind kKeyedBlock, kSinkBlock or kBlock.
  bool Decode(std::string_view p, RecordKind kind);
};
inline bool IsBlockRecord(RecordKind kind) {
  return kind == RecordKind::kKeyedBlock || kind == RecordKind::kSinkBlock ||
         kind == RecordKind::kBlock;
}

struct AckRecord {
  std::string sink;
  std::vector<uint64_t> block_lsns;

  std::string Encode() const;
  bool Decode(std::string_view p, bool named);
};

// Decodes a request record (kEncodedRequest, kViewedRequest, kTargetedRequest, kRequest or
// kSpans; `payload` taken) into `batch`, and filters its spans with `filter`
// (when given; not a kTargetedRequest's) against the clock they were
// received at, uncounted: the spans the client was told were rejected are
// dropped again, the same values trimmed (and sampled the same: `lsn`, the
// record's, for tail sampling's decisions). `tail_marks` false: tail
// sampling's marks are left for MarkRequestRecord.
Status DecodeRequestRecord(RecordKind kind, std::string payload, SpanFilter* filter,
                           SpanBatch* batch, uint64_t lsn = 0, bool tail_marks = true);
// Tail sampling's marks on a request record decoded without them (only
// noted while the sampler observes); nothing for a record not filtered.
void MarkRequestRecord(RecordKind kind, SpanFilter* filter, SpanBatch* batch, uint64_t lsn);
inline bool IsRequestRecord(RecordKind kind) {
  return kind == RecordKind::kEncodedRequest || kind == RecordKind::kTargetedRequest ||
         kind == RecordKind::kViewedRequest || kind == RecordKind::kRequest ||
         kind == RecordKind::kSpans;
}

// The deduplication token of the block sealed as record `block_lsn`.
std::string DedupToken(uint64_t epoch, uint64_t block_lsn);

// The name older logs' kBlock and kReplayed records belong to.
inline constexpr std::string_view kLegacySink = "chdb";

}  // namespace spanhouse::pipeline::durable
