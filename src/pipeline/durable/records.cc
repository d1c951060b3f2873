#include "pipeline/durable/records.h"

#include <algorithm>

namespace spanhouse::pipeline::durable {

namespace {

void PutName(std::string* out, const std::string& name) {
  out->push_back(static_cast<char>(name.size()));
  out->append(name);
}

// Reads the u8-length name at the front of `p` (which it then skips).
bool TakeName(std::string_view* p, std::string* name) {
  if (p->empty()) return false;
  const size_t n = static_cast<uint8_t>((*p)[0]);
  if (p->size() < 1 + n) return false;
  name->assign(p->substr(1, n));
  p->remove_prefix(1 + n);
  return true;
}

}  // namespace

std::string BlockRecord::Encode() const {
  std::string out;
  out.reserve(2 + sink.size() + key.size() + 8 + 8 * lsns.size());
  PutName(&out, sink);
  PutName(&out, key);
  PutLe(&out, lsns.size(), 4);
  for (uint64_t l : lsns) PutLe(&out, l, 8);
  PutLe(&out, chunks, 4);
  return out;
}

bool BlockRecord::Decode(std::string_view p, RecordKind kind) {
  sink = std::string(kLegacySink);
  if (kind != RecordKind::kBlock && !TakeName(&p, &sink)) return false;
  if (kind == RecordKind::kKeyedBlock) {
    if (!TakeName(&p, &key) || p.size() < 8) return false;
    const uint64_t n = GetLe(p, 0, 4);
    if (p.size() != 8 + 8 * n) return false;
    chunks = static_cast<uint32_t>(GetLe(p, 4 + 8 * n, 4));
    lsns.resize(n);
    for (uint64_t i = 0; i < n; ++i) lsns[i] = GetLe(p, 4 + 8 * i, 8);
    return chunks != 0;
  }
  // kSinkBlock and kBlock: the embedded sink's 12-byte key.
  if (p.size() < 16) return false;
  key.assign(p.substr(0, 12));
  const uint64_t n = GetLe(p, 12, 4);
  chunks = 1;
  if (p.size() == 20 + 8 * n) {
    chunks = static_cast<uint32_t>(GetLe(p, 16 + 8 * n, 4));
    if (chunks == 0) return false;
  } else if (p.size() != 16 + 8 * n) {
    return false;
  }
  lsns.resize(n);
  for (uint64_t i = 0; i < n; ++i) lsns[i] = GetLe(p, 16 + 8 * i, 8);
  return true;
}

std::string AckRecord::Encode() const {
  std::string out;
  out.reserve(1 + sink.size() + 4 + 8 * block_lsns.size());
  PutName(&out, sink);
  PutLe(&out, block_lsns.size(), 4);
  for (uint64_t l : block_lsns) PutLe(&out, l, 8);
  return out;
}

bool AckRecord::Decode(std::string_view p, bool named) {
  sink = std::string(kLegacySink);
  if (named && !TakeName(&p, &sink)) return false;
  if (p.size() < 4) return false;
  const uint64_t n = GetLe(p, 0, 4);
  if (p.size() != 4 + 8 * n) return false;
  block_lsns.resize(n);
  for (uint64_t i = 0; i < n; ++i) block_lsns[i] = GetLe(p, 4 + 8 * i, 8);
  return true;
}

std::string TargetedRequestHead(uint64_t received_ns, codec::BodyFormat format,
                                const std::vector<std::string>& sinks) {
  std::string head = EncodedRequestHead(received_ns, format);
  head.push_back(static_cast<char>(std::min<size_t>(sinks.size(), 255)));
  for (size_t i = 0; i < sinks.size() && i < 255; ++i) {
    const size_t n = std::min<size_t>(sinks[i].size(), 255);
    head.push_back(static_cast<char>(n));
    head.append(sinks[i], 0, n);
  }
  return head;
}

namespace {

// The length of a kTargetedRequest's head (0: broken), and its sinks.
size_t TargetedHead(std::string_view p, std::vector<std::string>* sinks) {
  if (p.size() < kEncodedRequestHeadBytes + 1) return 0;
  size_t at = kEncodedRequestHeadBytes;
  const auto n = static_cast<uint8_t>(p[at++]);
  for (uint8_t i = 0; i < n; ++i) {
    if (at >= p.size()) return 0;
    const auto k = static_cast<uint8_t>(p[at++]);
    if (p.size() - at < k) return 0;
    if (sinks != nullptr) sinks->emplace_back(p.substr(at, k));
    at += k;
  }
  return at;
}

}  // namespace

bool RequestTargets(RecordKind kind, std::string_view payload, std::vector<std::string>* sinks) {
  if (kind != RecordKind::kTargetedRequest) return false;
  sinks->clear();
  if (TargetedHead(payload, sinks) == 0) sinks->clear();
  return true;
}

Status DecodeRequestRecord(RecordKind kind, std::string payload, SpanFilter* filter,
                           SpanBatch* batch, uint64_t lsn, bool tail_marks) {
  if (kind == RecordKind::kTargetedRequest) {
    const size_t head = TargetedHead(payload, nullptr);
    if (head == 0 || !codec::IsBodyFormat(static_cast<uint8_t>(payload[kRequestHeadBytes]))) {
      return Status::Invalid("durable queue: a targeted request record with a broken head");
    }
    const auto format = static_cast<codec::BodyFormat>(payload[kRequestHeadBytes]);
    payload.erase(0, head);
    SH_RETURN_IF_ERROR(codec::DecodeBody(format, payload, batch));
    batch->peer_view = SpanBatch::kViewHere;  // an import: stored where it was taken
    return Status::Ok();
  }
  uint64_t received_ns = 0;
  codec::BodyFormat format = codec::BodyFormat::kOtlpProto;
  const bool timed = kind == RecordKind::kRequest || kind == RecordKind::kEncodedRequest ||
                     kind == RecordKind::kViewedRequest;
  uint64_t view = 0;
  if (timed) {
    if (payload.size() < kRequestHeadBytes) {
      return Status::Invalid("durable queue: request record too short");
    }
    received_ns = GetLe(payload, 0, 8);
  }
  if (kind == RecordKind::kEncodedRequest || kind == RecordKind::kViewedRequest) {
    const size_t head =
        kind == RecordKind::kViewedRequest ? kViewedRequestHeadBytes : kEncodedRequestHeadBytes;
    if (payload.size() < head ||
        !codec::IsBodyFormat(static_cast<uint8_t>(payload[kRequestHeadBytes]))) {
      return Status::Invalid("durable queue: request record without a known body format");
    }
    format = static_cast<codec::BodyFormat>(payload[kRequestHeadBytes]);
    if (kind == RecordKind::kViewedRequest) view = GetLe(payload, kEncodedRequestHeadBytes, 8);
    payload.erase(0, head);
  } else if (kind == RecordKind::kRequest) {
    payload.erase(0, kRequestHeadBytes);
  } else if (kind != RecordKind::kSpans) {
    return Status::Invalid("durable queue: not a request record");
  }
  if (Status st = codec::DecodeBody(format, payload, batch); !st.ok()) return st;
  batch->peer_view = view;  // before the filter: tail sampling observes the owned traces only
  if (timed && filter != nullptr) {
    FilterReport report;
    filter->Apply(*batch, received_ns, &report, /*count=*/false, lsn, tail_marks);
  }
  return Status::Ok();
}

void MarkRequestRecord(RecordKind kind, SpanFilter* filter, SpanBatch* batch, uint64_t lsn) {
  // The records DecodeRequestRecord filters: those with a receive time.
  const bool timed = kind == RecordKind::kRequest || kind == RecordKind::kEncodedRequest ||
                     kind == RecordKind::kViewedRequest;
  if (timed && filter != nullptr) filter->ApplyTail(*batch, lsn);
}

std::string DedupToken(uint64_t epoch, uint64_t block_lsn) {
  static const char kHex[] = "0123456789abcdef";
  std::string t = "sh-";
  for (int i = 60; i >= 0; i -= 4) t.push_back(kHex[(epoch >> i) & 0xf]);
  t += "-" + std::to_string(block_lsn);
  return t;
}

}  // namespace spanhouse::pipeline::durable
