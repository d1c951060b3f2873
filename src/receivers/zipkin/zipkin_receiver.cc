#include "receivers/zipkin/zipkin_receiver.h"

#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "net/http_status.h"
#include "receivers/intake/http_intake.h"

namespace spanhouse::receivers {

namespace {

using codec::BodyFormat;

constexpr std::string_view kPath = "/api/v2/spans";

// The media type, case-insensitive (RFC 9110); none: JSON, as Zipkin does.
std::optional<BodyFormat> FormatOf(std::string_view content_type) {
  std::string_view t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  std::string lower(t);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "application/json") return BodyFormat::kZipkinJson;
  if (lower == "application/x-protobuf" || lower == "application/protobuf") {
    return BodyFormat::kZipkinProto;
  }
  return std::nullopt;
}

void Answer(const IntakeResult& r, net::HttpResponse& resp) {
  resp.content_type = "text/plain";
  if (r.ok()) {
    resp.status = 202;
    resp.body.clear();
    return;
  }
  resp.status = net::HttpStatusOf(r.code);
  if (r.retry_after_s > 0)
    resp.headers.emplace_back("Retry-After", std::to_string(r.retry_after_s));
  resp.body = r.message + "\n";
}

}  // namespace

ZipkinReceiver::ZipkinReceiver(const HttpListenerOptions& listener, const IntakeOptions& intake,
                               pipeline::durable::DurableQueue& queue)
    : intake_(intake, queue, stats_),
      server_(ServerOptionsOf("zipkin", listener, intake),
              [this](net::HttpRequest& req, net::HttpResponse& resp, net::HttpDeferral& later) {
                Handle(req, resp, later);
              }) {}

Status ZipkinReceiver::Start() {
  return server_.Start();
}
void ZipkinReceiver::Stop() {
  server_.Stop();
}

void ZipkinReceiver::Handle(net::HttpRequest& req, net::HttpResponse& resp,
                            net::HttpDeferral& later) {
  if (!IsPostTo(kPath, req, resp, *stats_)) return;
  const std::optional<BodyFormat> format = FormatOf(req.content_type);
  if (!format) {
    stats_->requests++;
    stats_->rejected_media_type++;
    resp.status = 415;
    resp.body = "unsupported Content-Type '" + req.content_type +
                "': use application/json or application/x-protobuf\n";
    return;
  }
  SubmitHttp(intake_, *format, req, req.content_encoding, resp, later, Answer);
}

}  // namespace spanhouse::receivers
