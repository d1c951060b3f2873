// Zipkin v2 span decoders (POST /api/v2/spans): the JSON list of spans and the
// zipkin.proto3 ListOfSpans, mapped onto the OTLP span model the way the
// OpenTelemetry Collector's zipkin receiver does (differences noted below).
//
// Both decoders append to a SpanBatch and never allocate per span. On an error
// the batch holds a partial request and must be discarded by the caller; the
// Status carries a message fit for the client (HTTP 400 body).
//
// Mapping (zipkin_mapping.h has the details):
//   traceId (16 or 32 hex digits; 8 or 16 bytes)  trace id; a 64-bit id left-padded with zeros
//   id, parentId                                  span id, parent span id (parentId == id: root)
//   kind CLIENT/SERVER/PRODUCER/CONSUMER          the OTLP kind of the same name; absent:
//                                                 the `span.kind` tag's kind, else INTERNAL
//   timestamp, duration (µs)                      start = timestamp, end = timestamp + duration
//   (ns) name                                          name localEndpoint.serviceName the
//   resource's service.name: one resource per
//                                                 service name in a request (none: a resource
//                                                 without attributes, as the collector does)
//   localEndpoint ipv4|ipv6, port                 network.local.address, network.local.port
//   remoteEndpoint serviceName, ipv4|ipv6, port   service.peer.name, network.peer.address,
//                                                 network.peer.port (a tag of the same key wins)
//   annotations                                   events: name = value, time = timestamp
//   tags                                          string attributes, except the tags below
//   tag error                                     status ERROR, message = the value unless it is
//                                                 "" or "true"; error = "false" stays a tag
//   tags otel.status_code, otel.status_description  status code (OK, ERROR, UNSET) and message
//   tags otel.scope.name/version, otel.library.name/version  the instrumentation scope
//   tag w3c.tracestate                            trace state
//   debug, shared (when true)                     bool attributes zipkin.debug, zipkin.shared
#pragma once

#include <string_view>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::codec {

// A JSON array of Zipkin v2 spans (zipkin2-api.yaml, ListOfSpans).
// Strings are copied into the batch's arena.
Status DecodeZipkinJson(std::string_view body, SpanBatch& out);

// zipkin.proto3.ListOfSpans, protobuf wire format. Strings are copied into the
// batch's arena, unless `body` is the batch's source (SpanBatch::AdoptSource),
// in which case they are referenced there.
Status DecodeZipkinProto(std::string_view body, SpanBatch& out);

}  // namespace spanhouse::codec
