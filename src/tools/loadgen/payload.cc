#include "tools/loadgen/payload.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <unordered_map>
#include <utility>

#include "codec/proto_wire.h"

namespace spanhouse::loadgen {
namespace {

using codec::wire::Field;
using codec::wire::kFixed64;
using codec::wire::kLen;
using codec::wire::kVarint;
using codec::wire::Step;

// Attribute keys whose values real traffic rarely repeats (fresh values).
constexpr std::string_view kFreshKeys[] = {"url.full",
                                           "url.path",
                                           "url.query",
                                           "db.statement",
                                           "exception.message",
                                           "exception.stacktrace",
                                           "log.message",
                                           "messaging.message.id",
                                           "messaging.kafka.message.key",
                                           "app.search.query"};

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// The runs of `value` (at `offset` in the body) that fresh values rewrite:
// 8+ hex digits mixing letters and digits, else 3+ decimal digits.
void FindValueSites(std::string_view value, uint32_t offset, std::vector<ValueSite>* out) {
  size_t i = 0;
  while (i < value.size()) {
    if (!IsHex(value[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    bool letter = false, digit = false, upper = false;
    while (j < value.size() && IsHex(value[j])) {
      digit |= IsDigit(value[j]);
      letter |= !IsDigit(value[j]);
      upper |= value[j] >= 'A' && value[j] <= 'F';
      ++j;
    }
    // A word ending in a letter that is not a hex digit ("Chrome") is no id.
    const bool word = j < value.size() && std::isalpha(static_cast<unsigned char>(value[j])) != 0;
    if (j - i >= 8 && letter && digit && !word && j - i <= UINT16_MAX) {
      out->push_back({offset + static_cast<uint32_t>(i), static_cast<uint16_t>(j - i),
                      upper ? ValueSite::kHexUpper : ValueSite::kHexLower});
    } else {
      for (size_t k = i; k < j;) {  // the decimal runs inside
        if (!IsDigit(value[k])) {
          ++k;
          continue;
        }
        size_t e = k;
        while (e < j && IsDigit(value[e])) ++e;
        // After ':' a number is a port or a source line: the same in every
        // request.
        const bool fixed = k > 0 && value[k - 1] == ':';
        if (e - k >= 3 && e - k <= UINT16_MAX && !fixed) {
          out->push_back({offset + static_cast<uint32_t>(k), static_cast<uint16_t>(e - k),
                          ValueSite::kDecimal});
        }
        k = e;
      }
    }
    i = j;
  }
}

// Walks an encoded ExportTraceServiceRequest for what TraceSite holds.
class SiteWalker : public codec::wire::Reader {
 public:
  explicit SiteWalker(Payload* p) : Reader(p->body), p_(p) {}

  bool Run() {
    std::string_view in = p_->body;
    return Fields(in, "ExportTraceServiceRequest", [&](const Field& f) {
      return f.number != 1 || f.wire != kLen || ResourceSpans(f.bytes);
    });
  }

  // Statuses grouped by trace, in the order of the traces.
  void Finish() {
    std::stable_sort(found_.begin(), found_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    p_->statuses.reserve(found_.size());
    size_t k = 0;
    for (uint32_t t = 0; t < p_->traces.size(); ++t) {
      TraceSite& site = p_->traces[t];
      site.status_begin = static_cast<uint32_t>(p_->statuses.size());
      for (; k < found_.size() && found_[k].first == t; ++k)
        p_->statuses.push_back(found_[k].second);
      site.status_end = static_cast<uint32_t>(p_->statuses.size());
    }
  }

 private:
  struct IdHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& id) const {
      return static_cast<size_t>(id.first ^ (id.second * 0x9e3779b97f4a7c15ull));
    }
  };

  bool ResourceSpans(std::string_view in) {
    return Fields(in, "ResourceSpans", [&](const Field& f) {
      return f.number != 2 || f.wire != kLen || ScopeSpans(f.bytes);
    });
  }

  bool ScopeSpans(std::string_view in) {
    return Fields(in, "ScopeSpans",
                  [&](const Field& f) { return f.number != 2 || f.wire != kLen || Span(f.bytes); });
  }

  bool Span(std::string_view in) {
    uint64_t id[2] = {0, 0};
    bool have_id = false, root = true;
    uint32_t start_at = kNoOffset;
    uint64_t start = 0, end = 0;
    StatusSite status;
    bool error = false;
    Field f;
    for (;;) {
      const Step st = Next(in, "Span", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      if (f.number == 1 && f.wire == kLen && f.bytes.size() == 16) {
        std::memcpy(id, f.bytes.data(), 16);
        have_id = true;
      } else if (f.number == 4 && f.wire == kLen && !f.bytes.empty()) {
        root = false;
      } else if (f.number == 7 && f.wire == kFixed64) {
        start = f.num;
        start_at = static_cast<uint32_t>(Offset(in) - 8);
      } else if (f.number == 8 && f.wire == kFixed64) {
        end = f.num;
      } else if (f.number == 15 && f.wire == kLen) {
        if (!Status(f.bytes, &status, &error)) return false;
      } else if (f.number == 9 && f.wire == kLen) {
        if (!KeyValue(f.bytes)) return false;
      } else if (f.number == 11 && f.wire == kLen) {  // an event: its attributes
        if (!Fields(f.bytes, "Event", [&](const Field& e) {
              return e.number != 3 || e.wire != kLen || KeyValue(e.bytes);
            })) {
          return false;
        }
      }
    }
    if (!have_id) return true;
    auto [it, added] =
        index_.try_emplace(std::make_pair(id[0], id[1]), static_cast<uint32_t>(p_->traces.size()));
    if (added) {
      TraceSite site;
      site.id[0] = id[0];
      site.id[1] = id[1];
      p_->traces.push_back(site);
    }
    if (root) {
      TraceSite& site = p_->traces[it->second];
      site.root_start = start_at;
      site.root_ns = end > start ? end - start : 0;
    }
    if (error) found_.emplace_back(it->second, status);
    return true;
  }

  // A string attribute of a fresh-values key: its value's sites.
  bool KeyValue(std::string_view in) {
    std::string_view key, value;
    bool text = false;
    if (!Fields(in, "KeyValue", [&](const Field& f) {
          if (f.number == 1 && f.wire == kLen) key = f.bytes;
          if (f.number == 2 && f.wire == kLen) {
            return Fields(f.bytes, "AnyValue", [&](const Field& v) {
              if (v.number == 1 && v.wire == kLen) {
                value = v.bytes;
                text = true;
              }
              return true;
            });
          }
          return true;
        })) {
      return false;
    }
    if (!text || !IsFreshValueKey(key)) return true;
    FindValueSites(value, static_cast<uint32_t>(Offset(value)), &p_->values);
    return true;
  }

  // An ERROR status whose tag and value bytes the patch can rewrite in place
  // (one-byte tags, a one-byte code) becomes a StatusSite.
  bool Status(std::string_view in, StatusSite* site, bool* error) {
    Field f;
    uint32_t message_tag = kNoOffset, code = kNoOffset;
    uint64_t value = 0;
    for (;;) {
      const size_t tag_at = Offset(in);
      const Step st = Next(in, "Status", f);
      if (st == Step::kError) return false;
      if (st == Step::kEnd) break;
      if (f.number == 2 && f.wire == kLen && static_cast<uint8_t>(p_->body[tag_at]) == 0x12) {
        message_tag = static_cast<uint32_t>(tag_at);
      } else if (f.number == 3 && f.wire == kVarint &&
                 static_cast<uint8_t>(p_->body[tag_at]) == 0x18 && Offset(in) == tag_at + 2) {
        code = static_cast<uint32_t>(tag_at + 1);
        value = f.num;
      }
    }
    *error = code != kNoOffset && value == static_cast<uint64_t>(StatusCodeOtlp::kError);
    site->message_tag = message_tag;
    site->code = code;
    return true;
  }

  Payload* p_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint32_t, IdHash> index_;
  std::vector<std::pair<uint32_t, StatusSite>> found_;  // (trace, status)
};

inline void Xor64(char* at, uint64_t mask) {
  uint64_t v;
  std::memcpy(&v, at, 8);
  v ^= mask;
  std::memcpy(at, &v, 8);
}

inline void AddLe64(char* at, int64_t delta) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(at[i])) << (8 * i);
  v += static_cast<uint64_t>(delta);
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(v >> (8 * i));
}

}  // namespace

bool IndexTraces(Payload* p) {
  p->traces.clear();
  p->statuses.clear();
  p->values.clear();
  SiteWalker w(p);
  if (!w.Run()) {
    p->traces.clear();
    return false;
  }
  w.Finish();
  return true;
}

void BuildPayload(TraceGenerator& gen, size_t min_spans, uint64_t base_ns, Payload* out) {
  SpanBatch batch;
  out->spans = static_cast<uint32_t>(gen.AppendTraces(base_ns, kTraceSpacingNs, min_spans, &batch));
  out->base_ns = base_ns;
  out->body.clear();
  out->offsets.clear();
  codec::EncodeOtlpProto(batch, &out->body, &out->offsets);
  IndexTraces(out);
}

std::vector<Payload> BuildPayloads(uint64_t seed, std::string_view run_id, size_t count,
                                   size_t min_spans, uint64_t base_ns, const MarkShape& shape) {
  return BuildPayloads(CorpusOptions{seed}, run_id, count, min_spans, base_ns, shape);
}

std::vector<Payload> BuildPayloads(const CorpusOptions& corpus, std::string_view run_id,
                                   size_t count, size_t min_spans, uint64_t base_ns,
                                   const MarkShape& shape) {
  TraceGenerator gen(corpus);
  gen.SetRunId(run_id);
  gen.SetMarkShape(shape);
  std::vector<Payload> out(count);
  uint64_t t = base_ns;
  for (Payload& p : out) {
    BuildPayload(gen, min_spans, t, &p);
    t += kTraceSpacingNs * (p.spans / 4 + 1);  // ~4 spans a trace at least
  }
  return out;
}

Patch Patch::Random(Rng& rng, int64_t time_delta_ns) {
  Patch p;
  do {
    p.trace_mask[0] = rng.Next();
    p.trace_mask[1] = rng.Next();
  } while (p.trace_mask[0] == 0 && p.trace_mask[1] == 0);
  do p.span_mask = rng.Next();
  while (p.span_mask == 0);
  p.time_delta_ns = time_delta_ns;
  return p;
}

void ApplyPatchInPlace(const codec::IdOffsets& offsets, const Patch& patch, std::string* body) {
  char* b = body->data();
  for (uint32_t off : offsets.trace_ids) {
    Xor64(b + off, patch.trace_mask[0]);
    Xor64(b + off + 8, patch.trace_mask[1]);
  }
  for (uint32_t off : offsets.span_ids) Xor64(b + off, patch.span_mask);
  if (patch.time_delta_ns != 0) {
    for (uint32_t off : offsets.times) AddLe64(b + off, patch.time_delta_ns);
  }
}

bool IsFreshValueKey(std::string_view key) {
  return std::find(std::begin(kFreshKeys), std::end(kFreshKeys), key) != std::end(kFreshKeys);
}

void FreshValues(const Payload& p, uint64_t seed, std::string* body) {
  static constexpr char kLower[] = "0123456789abcdef";
  static constexpr char kUpper[] = "0123456789ABCDEF";
  char* b = body->data();
  uint64_t state = seed;
  uint64_t bits = 0;
  int left = 0;  // 4-bit draws left in `bits`
  auto draw4 = [&] {
    if (left == 0) {
      bits = SplitMix64(state);
      left = 16;
    }
    const auto v = static_cast<unsigned>(bits & 0xf);
    bits >>= 4;
    --left;
    return v;
  };
  for (const ValueSite& s : p.values) {
    char* at = b + s.offset;
    for (uint16_t k = 0; k < s.length; ++k) {
      const unsigned v = draw4();
      if (s.kind == ValueSite::kDecimal) {
        // 16 values onto 10 digits: a slight bias, no loop; a number keeps
        // a leading non-zero digit.
        unsigned d = v % 10;
        if (k == 0 && at[0] != '0' && d == 0) d = 1 + v % 9;
        at[k] = static_cast<char>('0' + d);
      } else {
        at[k] = (s.kind == ValueSite::kHexUpper ? kUpper : kLower)[v];
      }
    }
  }
}

void ApplyPatch(const Payload& p, const Patch& patch, std::string* out) {
  out->assign(p.body);
  ApplyPatchInPlace(p.offsets, patch, out);
  if (patch.value_seed != 0) FreshValues(p, patch.value_seed, out);
}

void ApplyPatch(const Payload& p, const Patch& patch, const TraceMarks& marks, std::string* out,
                TraceCounts* counts) {
  ApplyPatch(p, patch, out);
  char* b = out->data();
  TraceCounts c;
  c.traces = p.traces.size();
  for (const TraceSite& t : p.traces) {
    const uint64_t w0 = t.id[0] ^ patch.trace_mask[0];
    const uint64_t w1 = t.id[1] ^ patch.trace_mask[1];
    bool error = t.status_end > t.status_begin;
    if (marks.error_share >= 0) {
      error = error && TraceChosen(w0, w1, kErrorChoice, marks.error_share);
      for (uint32_t k = t.status_begin; k < t.status_end; ++k) {
        const StatusSite& s = p.statuses[k];
        // ERROR, or UNSET with the message in unknown field 15 (tag 0x7a).
        b[s.code] = static_cast<char>(error ? 2 : 0);
        if (s.message_tag != kNoOffset) b[s.message_tag] = static_cast<char>(error ? 0x12 : 0x7a);
      }
    }
    bool slow = t.root_ns >= marks.slow_ns;
    if (marks.slow_share >= 0 && t.root_start != kNoOffset &&
        TraceChosen(w0, w1, kSlowChoice, marks.slow_share)) {
      AddLe64(b + t.root_start, -static_cast<int64_t>(marks.slow_ns));
      slow = true;
    }
    c.error_traces += error ? 1 : 0;
    c.slow_traces += slow ? 1 : 0;
  }
  if (counts != nullptr) *counts = c;
}

}  // namespace spanhouse::loadgen
