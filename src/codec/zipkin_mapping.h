// The Zipkin v2 -> OTLP span model mapping both Zipkin decoders share
// (zipkin_json.cc, zipkin_proto.cc): a decoder reads a span's fields in
// whatever order they come, writes ids and name into the batch itself, and
// hands everything else to a RequestMapper, which writes it the same way
// whichever encoding it came from.
//
// Choices, against the OpenTelemetry Collector's zipkin receiver
// (pkg/translator/zipkin/zipkinv2, the same mapping unless said otherwise):
// - kind absent: the `span.kind` tag's kind (client, server, producer,
//   consumer, internal; consumed), else INTERNAL: a Zipkin span without a kind
//   is a local one, and OTel's Zipkin exporters send INTERNAL spans without a
//   kind. (The collector: UNSPECIFIED, INTERNAL only for span.kind=internal.)
// - endpoints: the current semantic conventions, as the collector's
//   EmitV1NetworkConventions gate does: network.local.address/port,
//   service.peer.name, network.peer.address/port (ports as ints, only when
//   > 0). An address is its canonical text; ipv4 is preferred when both are
//   sent. A tag with the same key wins over the endpoint's value.
// - no localEndpoint.serviceName: the spans share a resource without
//   attributes (the collector does the same), named "missing-service-name" as
//   Jaeger names it.
// - tags stay on the span, even those that name resource attributes (the
//   collector moves those to the resource).
// - error: any value but "false" means ERROR (Zipkin treats every error tag
//   as a failure; the collector only "true"); the value is the message unless
//   it is "" or "true". otel.status_code (OK, ERROR, UNSET, or STATUS_CODE_*)
//   sets the code, with otel.status_description as the message; an error tag
//   still makes it ERROR. Consumed tags are not kept as attributes; an
//   unknown otel.status_code, and otel.status_description without one, are.
// - debug, shared: the collector drops both; here a bool attribute each
//   (zipkin.debug, zipkin.shared) when true. A shared span keeps its id: it is
//   the server side of an RPC whose client span has the same id.
// - timestamp absent: start 0, end = duration (the filter then drops it).
// - annotations: the value is the event name as sent (the collector also
//   parses the "name|{json attributes}|dropped" form its own exporter writes).
// - the same special tag twice: the last one counts; other duplicate tags are
//   all kept.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "model/span_batch.h"

namespace spanhouse::codec::zipkin {

// Span.Kind in zipkin.proto3 (the JSON names without the prefix).
enum class Kind : uint8_t { kAbsent = 0, kClient, kServer, kProducer, kConsumer };

// Largest time in microseconds whose nanoseconds fit in 64 bits (year 2554).
constexpr uint64_t kMaxMicros = UINT64_MAX / 1000;

// Longest id text accepted: 32 hex digits for a trace id, 16 for a span id.
// Shorter ids are left-padded with zeros, as Zipkin does.
// False if `hex` is empty, longer than 2 * n digits, or not hex.
bool ParseHexId(std::string_view hex, uint8_t* id, size_t n);

struct Endpoint {
  std::string_view service_name;
  bool has_ipv4 = false;
  bool has_ipv6 = false;
  std::array<uint8_t, 4> ipv4{};
  std::array<uint8_t, 16> ipv6{};
  int32_t port = 0;  // 0: absent
};

// A tag the mapping consumes, as last seen.
struct SpecialTag {
  bool set = false;
  std::string_view value;
};

// What a span says besides ids and name, gathered while its fields are read.
struct SpanFields {
  Kind kind = Kind::kAbsent;
  uint64_t timestamp_us = 0;
  uint64_t duration_us = 0;
  bool debug = false;
  bool shared = false;
  Endpoint local;
  Endpoint remote;
  SpecialTag error;
  SpecialTag status_description;
  SpecialTag scope_name;
  SpecialTag scope_version;
  SpecialTag library_name;
  SpecialTag library_version;
  SpecialTag trace_state;
  bool has_status_code = false;       // an otel.status_code tag with a known value
  uint8_t status_code = 0;            // its StatusCodeOtlp
  uint8_t tag_kind = 0;               // SpanKind of a span.kind tag, 0 if none
  uint8_t endpoint_keys_in_tags = 0;  // a bit per endpoint attribute key a tag has
};

// Maps one request's spans into a batch.
class RequestMapper {
 public:
  explicit RequestMapper(SpanBatch& out) : out_(out) {}

  // Appends a span row (resource and scope are set by Finish) and resets `f`.
  uint32_t BeginSpan(SpanFields& f);
  // A tag of span `i`: gathered into `f` when the mapping consumes it, else
  // appended as a string attribute.
  void Tag(uint32_t i, SpanFields& f, std::string_view key, std::string_view value);
  // An annotation of span `i`, its time checked (<= kMaxMicros) by the caller.
  void Annotation(uint32_t i, uint64_t timestamp_us, std::string_view value);
  // Writes what `f` gathered into span `i`. False if timestamp + duration
  // passes kMaxMicros (each alone is checked by the caller).
  bool Finish(uint32_t i, const SpanFields& f);

 private:
  enum Key : uint8_t {
    kServiceName,
    kLocalAddress,
    kLocalPort,
    kPeerService,
    kPeerAddress,
    kPeerPort,
    kDebug,
    kShared,
    kStatusDescription,
    kTrue,  // the value of the bool attributes
    kKeyCount
  };
  StrRef Interned(Key k);
  uint32_t Resource(std::string_view service);
  uint32_t Scope(std::string_view name, std::string_view version);
  void AddAttr(uint32_t i, StrRef key, ValueType type, StrRef value);
  void AddEndpoint(uint32_t i, const SpanFields& f, const Endpoint& e, Key address, Key port);

  struct PairHash {
    size_t operator()(const std::pair<std::string_view, std::string_view>& p) const {
      const size_t a = std::hash<std::string_view>()(p.first);
      return a ^ (std::hash<std::string_view>()(p.second) + 0x9e3779b97f4a7c15ULL + (a << 6));
    }
  };

  SpanBatch& out_;
  std::array<StrRef, kKeyCount> interned_{};
  uint32_t interned_mask_ = 0;
  // Keys point into the request body (or the JSON parser's strings), which
  // outlive the mapper.
  std::unordered_map<std::string_view, uint32_t> resources_;
  std::unordered_map<std::pair<std::string_view, std::string_view>, uint32_t, PairHash> scopes_;
  // The previous span's resource, so a run of one service's spans is not hashed.
  bool last_resource_set_ = false;
  std::string_view last_service_;
  uint32_t last_resource_ = 0;
};

}  // namespace spanhouse::codec::zipkin
