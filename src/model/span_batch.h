// SpanBatch: the one in-memory shape of spans from decoder to encoder.
//
// Columnar on purpose: a request's spans are appended to flat vectors, and
// every string lives in one arena owned by the batch, so decoding a request
// costs a handful of vector growths instead of a heap object per span,
// attribute or event. Child rows (attributes, events, links) live in flat
// columns of their own; their owner holds a [begin, end) range into them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spanhouse {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

// A slice of the batch's string arena. Offsets, not pointers, so the arena
// may grow while it is being filled.
struct StrRef {
  uint32_t off = 0;
  uint32_t len = 0;
};

// [begin, end) into a flat child column.
struct Range {
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t size() const { return end - begin; }
};

// OTLP AnyValue kinds. The numbers are stored in ClickHouse: never reorder.
enum class ValueType : uint8_t {
  kEmpty = 0,
  kString = 1,
  kBool = 2,
  kInt = 3,
  kDouble = 4,
  kBytes = 5,
  kArray = 6,   // value holds JSON text of the array
  kKvList = 7,  // value holds JSON text of the object
};

// How each value type is kept as bytes in an attribute's value column:
//   string, bytes: the raw bytes;  bool: "true" / "false";  int: decimal;
//   double: shortest text that round-trips;  array / kvlist: JSON text.
struct AttrColumns {
  std::vector<StrRef> key;
  std::vector<ValueType> type;
  std::vector<StrRef> value;

  size_t size() const { return key.size(); }
  void clear() {
    key.clear();
    type.clear();
    value.clear();
  }
};

// OTLP span kinds and status codes (numbers as in the OTLP protobuf).
enum class SpanKind : uint8_t {
  kUnspecified = 0,
  kInternal,
  kServer,
  kClient,
  kProducer,
  kConsumer
};
enum class StatusCodeOtlp : uint8_t { kUnset = 0, kOk = 1, kError = 2 };

// Jaeger's lowercase name of a span kind ("server", "client", ...); "" for
// kUnspecified and out-of-range values.
std::string_view SpanKindName(uint8_t kind);
// The kind named `name` as Jaeger ("server") or OTLP ("SPAN_KIND_SERVER")
// writes it, in any case; "" and "unspecified" are kUnspecified. False for
// any other name.
bool ParseSpanKind(std::string_view name, uint8_t* kind);

class SpanBatch {
 public:
  // ---- strings ----
  // A string lives in the batch's arena or, with kSourceBit set in its
  // offset, in the source: the request body the batch was decoded from,
  // kept whole so the decoder points into it instead of copying every name,
  // key and value (AdoptSource, RefString).
  static constexpr uint32_t kSourceBit = 1u << 31;
  StrRef AddString(std::string_view s);
  std::string_view Str(StrRef r) const {
    // Masking instead of subtracting kSourceBit from the base: an empty ref into an empty
    // (null) source must stay null + 0, which is defined.
    if ((r.off & kSourceBit) != 0) return {src_.data() + (r.off & ~kSourceBit), r.len};
    return {arena_.data() + r.off, r.len};
  }
  // Takes `body` (moved from) as the batch's source if the batch has none
  // yet and it is shorter than 2 GiB; otherwise false, `body` untouched.
  // The source is never changed after, so a copy of the batch shares it.
  bool AdoptSource(std::string& body);
  std::string_view source() const { return src_; }
  // `s` by reference if it lies inside the source, else copied to the arena.
  StrRef RefString(std::string_view s) {
    const auto b = reinterpret_cast<uintptr_t>(src_.data());
    const auto p = reinterpret_cast<uintptr_t>(s.data());
    if (!src_.empty() && p >= b && p - b <= src_.size() - s.size() && s.size() <= src_.size()) {
      return {static_cast<uint32_t>(p - b) | kSourceBit, static_cast<uint32_t>(s.size())};
    }
    return AddString(s);
  }
  // Append to the arena piecewise: BeginString(); AppendToString(..)*; EndString().
  uint32_t BeginString() const { return static_cast<uint32_t>(arena_.size()); }
  void AppendToString(std::string_view s) { arena_.append(s); }
  StrRef EndString(uint32_t begin) const {
    return {begin, static_cast<uint32_t>(arena_.size() - begin)};
  }

  // ---- resources (one per OTLP ResourceSpans) ----
  struct Resources {
    std::vector<Range> attrs;  // into resource_attrs
    std::vector<uint32_t> dropped_attributes_count;
    std::vector<StrRef> schema_url;
    std::vector<StrRef> service_name;  // service.name, or Jaeger's name (service_name.h)
  } resources;
  AttrColumns resource_attrs;

  // ---- instrumentation scopes (one per OTLP ScopeSpans) ----
  struct Scopes {
    std::vector<StrRef> name;
    std::vector<StrRef> version;
    std::vector<Range> attrs;  // into scope_attrs
    std::vector<uint32_t> dropped_attributes_count;
    std::vector<StrRef> schema_url;
  } scopes;
  AttrColumns scope_attrs;

  // ---- spans ----
  struct Spans {
    std::vector<TraceId> trace_id;
    std::vector<SpanId> span_id;
    std::vector<SpanId> parent_span_id;  // all zero: a root span
    std::vector<StrRef> trace_state;
    std::vector<uint32_t> flags;
    std::vector<StrRef> name;
    std::vector<uint8_t> kind;  // SpanKind
    std::vector<uint64_t> start_ns;
    std::vector<uint64_t> end_ns;
    std::vector<uint8_t> status_code;  // StatusCodeOtlp
    std::vector<StrRef> status_message;
    std::vector<uint32_t> resource;  // index into resources
    std::vector<uint32_t> scope;     // index into scopes
    std::vector<Range> attrs;        // into span_attrs
    std::vector<uint32_t> dropped_attributes_count;
    std::vector<Range> events;  // into events
    std::vector<uint32_t> dropped_events_count;
    std::vector<Range> links;  // into links
    std::vector<uint32_t> dropped_links_count;
    // 1: sampled out (pipeline/sampling): the span counts in the metrics
    // (RED, dependency edges, the service catalog) but is not stored as a
    // span. A sink that stores spans skips it; the ClickHouse sink writes
    // its few metric fields to the sampled_spans table. Its attributes,
    // events and links are already emptied.
    std::vector<uint8_t> metrics_only;
  } spans;
  AttrColumns span_attrs;

  // ---- span events ----
  struct Events {
    std::vector<uint64_t> time_ns;
    std::vector<StrRef> name;
    std::vector<Range> attrs;  // into event_attrs
    std::vector<uint32_t> dropped_attributes_count;
  } events;
  AttrColumns event_attrs;

  // ---- span links ----
  struct Links {
    std::vector<TraceId> trace_id;
    std::vector<SpanId> span_id;
    std::vector<StrRef> trace_state;
    std::vector<uint32_t> flags;
    std::vector<Range> attrs;  // into link_attrs
    std::vector<uint32_t> dropped_attributes_count;
  } links;
  AttrColumns link_attrs;

  // When several nodes act as one system (peers/ring.h): the nodes that were up when the
  // request was accepted (bit i: node i of peers.nodes), among which each trace's owner is
  // chosen, so that every reading of the request (live, or its record read back later)
  // hands each span to the same node. Logged with the request; 0: none (a single node).
  // A batch made from another by Append or AppendSpans takes its view when it had none.
  uint64_t peer_view = 0;
  // The view of a request that is this node's whole, whatever is up: one forwarded here by
  // another node (never forwarded twice), an import into the shared store.
  static constexpr uint64_t kViewHere = ~uint64_t{0};

  // Append a row with every column defaulted; returns its index.
  uint32_t AddResource();
  uint32_t AddScope();
  uint32_t AddSpan(uint32_t resource, uint32_t scope);
  uint32_t AddEvent();
  uint32_t AddLink();
  static void AddAttr(AttrColumns& cols, StrRef key, ValueType type, StrRef value);

  // Capacity for this many rows of each kind, so filling the batch does not
  // grow its columns step by step (each growth a copy and fresh pages).
  struct Shape {
    size_t spans = 0, span_attrs = 0, events = 0, event_attrs = 0, links = 0, link_attrs = 0;
  };
  void Reserve(const Shape& shape);
  Shape shape() const;

  // Sets resources.service_name[r]: service.name or JaegerServiceName (service_name.h).
  void ResolveServiceName(uint32_t r);

  size_t span_count() const { return spans.trace_id.size(); }
  bool empty() const { return spans.trace_id.empty(); }
  // Bytes held by the batch (capacity, not size): what a queue accounts for.
  size_t MemoryBytes() const;
  void Clear();

  // Appends every span of `other` (with its resource, scope, events, links
  // and attributes) to this batch.
  void Append(const SpanBatch& other);
  // Appends spans `which[0..n)` of `other` (all of them, in order, when
  // `which` is null), bringing along only the resources and scopes they use.
  void AppendSpans(const SpanBatch& other, const uint32_t* which, size_t n);

  // The batch as columnar bytes (model/columnar.cc), appended to `out`: its
  // columns, arena and source copied as they are, so reading them back is
  // copies and bounds checks, not a decode.
  void AppendColumnar(std::string* out) const;
  // Reads what AppendColumnar wrote into this empty batch. `bytes` may be
  // taken (as the batch's source). False, with `why`, for bytes that are not
  // such a batch or point outside themselves; the batch is then empty.
  bool ReadColumnar(std::string& bytes, std::string* why = nullptr);

  // Field-by-field equality of the logical content (not of the arena layout).
  bool LogicallyEquals(const SpanBatch& other, std::string* why = nullptr) const;

 private:
  std::string arena_;
  std::shared_ptr<const std::string> source_;  // null: none
  std::string_view src_;                       // *source_ (stays valid when the batch moves)
};

// A resource's identity: a 64-bit hash of everything stored about it (its
// attributes in order, with their types; schema URL; dropped-attribute
// count). Spans store this id and the resource is stored once per id, so
// the ~15 resource attributes an SDK repeats on every request are not
// written, sorted and compressed again for every span.
uint64_t ResourceFingerprint(const SpanBatch& b, uint32_t resource);

// A span's identity for deduplication: its ids and a 64-bit hash of what it
// says (SpanContentHash). A retried request's span has the same key; the two
// halves of a Zipkin shared span (client and server, one span id) do not.
struct SpanContentKey {
  TraceId trace_id{};
  SpanId span_id{};
  uint64_t content = 0;
  bool operator==(const SpanContentKey&) const = default;
};
static_assert(sizeof(SpanContentKey) == 32);

// A hash of span `s` of `b`: its parent, kind, status code and message,
// flags, times, name, service, trace state and how many attributes, events
// and links it has. Ids are not in it (SpanContentKey has them). A retried
// span hashes the same; two spans with the same ids that differ in any of
// these differ here, except with a probability of about 2^-64.
uint64_t SpanContentHash(const SpanBatch& b, uint32_t s);
// The key of every span of `b`, in order.
void SpanContentKeys(const SpanBatch& b, std::vector<SpanContentKey>* keys);
// Removes from `b` every span whose SpanContentKey an earlier span of `b`
// has (a store that holds a span twice: written before deduplication at
// intake, or retried past its window); returns how many. Spans that share
// ids but not content (a Zipkin shared span's two halves) are both kept.
size_t DropRepeatedSpans(SpanBatch* b);

// Appends to `idx` the spans of `b` whose trace `pick(trace_id)` takes, asking
// once per run of spans of one trace (a trace's spans mostly come together).
template <typename Pick>
void SpansOfTraces(const SpanBatch& b, const Pick& pick, std::vector<uint32_t>* idx) {
  const TraceId* prev = nullptr;
  bool taken = false;
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    const TraceId& t = b.spans.trace_id[i];
    if (prev == nullptr || t != *prev) {
      taken = pick(t);
      prev = &t;
    }
    if (taken) idx->push_back(i);
  }
}

// Jaeger's reference type for link `l` of `b`: "CHILD_OF" when the link's
// opentracing.ref_type attribute is child_of, else "FOLLOWS_FROM" (the
// OpenTelemetry translator's rule).
std::string_view JaegerRefType(const SpanBatch& b, uint32_t l);
// Whether link `l` points at span `s`'s parent (Jaeger folds such a link
// into the parent's reference, which takes the link's type).
bool LinksToParent(const SpanBatch& b, uint32_t s, uint32_t l);

// Hex helpers for ids at the API edge.
// For hash tables keyed by trace id: a mix of the whole id, so ids whose
// random part is short (a 64-bit id padded with zeros) spread too.
struct TraceIdHash {
  size_t operator()(const TraceId& id) const {
    uint64_t a;
    uint64_t b;
    std::memcpy(&a, id.data(), 8);
    std::memcpy(&b, id.data() + 8, 8);
    return static_cast<size_t>(a ^ (b * 0x9E3779B97F4A7C15ull));
  }
};

std::string ToHex(const uint8_t* data, size_t n);
template <size_t N>
std::string ToHex(const std::array<uint8_t, N>& id) {
  return ToHex(id.data(), N);
}
// Parses exactly 2*N hex digits; false if the text is not that.
bool FromHex(std::string_view hex, uint8_t* out, size_t n);
template <size_t N>
bool IsZero(const std::array<uint8_t, N>& id) {
  for (uint8_t b : id)
    if (b != 0) return false;
  return true;
}

}  // namespace spanhouse
