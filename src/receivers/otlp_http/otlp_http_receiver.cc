#include "receivers/otlp_http/otlp_http_receiver.h"

#include <algorithm>
#include <cctype>

#include "codec/compression.h"
#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "codec/value_text.h"
#include "net/http_status.h"
#include "receivers/intake/http_intake.h"

namespace spanhouse::receivers {

namespace {

enum class Encoding { kProto, kJson, kUnknown };

// Media types and content codings are case-insensitive (RFC 9110).
std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

Encoding EncodingOf(std::string_view content_type) {
  const std::string t = Lower(Trim(content_type.substr(0, content_type.find(';'))));
  if (t == "application/x-protobuf" || t == "application/protobuf") return Encoding::kProto;
  if (t == "application/json") return Encoding::kJson;
  return Encoding::kUnknown;
}

// google.rpc.Status {int32 code = 1; string message = 2;}, the error body the
// OTLP/HTTP specification asks for, in the request's encoding.
void ErrorBody(Encoding enc, int http_status, int rpc_code, const std::string& message,
               net::HttpResponse& resp) {
  resp.status = http_status;
  if (enc == Encoding::kJson) {
    resp.content_type = "application/json";
    resp.body = "{\"code\":" + std::to_string(rpc_code) + ",\"message\":";
    codec::AppendJsonString(resp.body, message);
    resp.body += "}";
    return;
  }
  resp.content_type = "application/x-protobuf";
  resp.body.clear();
  auto varint = [&](uint64_t v) {
    while (v >= 0x80) {
      resp.body.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    resp.body.push_back(static_cast<char>(v));
  };
  resp.body.push_back(0x08);
  varint(static_cast<uint64_t>(rpc_code));
  resp.body.push_back(0x12);
  varint(message.size());
  resp.body += message;
}

// gRPC codes used in google.rpc.Status bodies.
constexpr int kRpcInvalidArgument = 3;
constexpr int kRpcResourceExhausted = 8;
constexpr int kRpcUnavailable = 14;

// The intake's result as the OTLP/HTTP answer: 200 with an
// ExportTraceServiceResponse (spans the filter dropped are reported, not
// retried: OTLP partial success; with trims only, the message alone is a
// warning), or the error status with a google.rpc.Status body.
void Answer(Encoding enc, const IntakeResult& r, net::HttpResponse& resp) {
  if (r.ok()) {
    resp.status = 200;
    if (enc == Encoding::kJson) {
      resp.content_type = "application/json";
      resp.body = codec::EncodeExportResponseJson(r.rejected_spans, r.message);
    } else {
      resp.content_type = "application/x-protobuf";
      resp.body = codec::EncodeExportResponseProto(r.rejected_spans, r.message);
    }
    return;
  }
  if (r.retry_after_s > 0)
    resp.headers.emplace_back("Retry-After", std::to_string(r.retry_after_s));
  const int status = net::HttpStatusOf(r.code);
  const int rpc = status == 429   ? kRpcResourceExhausted
                  : status == 503 ? kRpcUnavailable
                                  : kRpcInvalidArgument;
  ErrorBody(enc, status, rpc, r.message, resp);
}

}  // namespace

OtlpHttpReceiver::OtlpHttpReceiver(const HttpListenerOptions& listener, const IntakeOptions& intake,
                                   pipeline::durable::DurableQueue& queue)
    : intake_(intake, queue, stats_),
      server_(ServerOptionsOf("otlp-http", listener, intake),
              [this](net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later) {
                Handle(req, resp, later);
              }) {}

Status OtlpHttpReceiver::Start() {
  return server_.Start();
}
void OtlpHttpReceiver::Stop() {
  server_.Stop();
}

void OtlpHttpReceiver::Handle(net::HttpRequest& req, net::HttpResponse& resp,
                              net::HttpDeferral& later) {
  if (!IsPostTo("/v1/traces", req, resp, *stats_)) return;
  const Encoding enc = EncodingOf(req.content_type);
  if (enc == Encoding::kUnknown) {
    stats_->requests++;
    stats_->rejected_media_type++;
    resp.status = 415;
    resp.body = "unsupported Content-Type '" + req.content_type +
                "': use application/x-protobuf or application/json\n";
    return;
  }
  const auto format =
      enc == Encoding::kProto ? codec::BodyFormat::kOtlpProto : codec::BodyFormat::kOtlpJson;
  SubmitHttp(intake_, format, req, Trim(req.content_encoding), resp, later,
             [enc](const IntakeResult& r, net::HttpResponse& out) { Answer(enc, r, out); });
}

}  // namespace spanhouse::receivers
