// Errors on the data path are values: a code that says what went wrong and
// whether a retry can help, plus a message meant for the client or the log.
#pragma once

#include <string>
#include <utility>

namespace spanhouse {

// The one vocabulary of errors. Each protocol maps it once: HTTP in
// net/http_status.h, gRPC in receivers/otlp_grpc.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input: 400, never retried
  kTooLarge,           // body or request over a cap: 413, never retried
  kUnsupportedMedia,   // an unknown media type or content coding: 415
  kNotFound,           // 404
  kResourceExhausted,  // memory or queue full: 429 + Retry-After, retry soon
  kUnavailable,        // store down, disk failing, shutting down: 503, retry later
  kInternal,           // broken invariant or store failure
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status Invalid(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status TooLarge(std::string m) { return {StatusCode::kTooLarge, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupportedMedia, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool retryable() const {
    return code_ == StatusCode::kResourceExhausted || code_ == StatusCode::kUnavailable;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace spanhouse

// Returns the Status of `expr` from the enclosing function unless it is ok.
#define SH_RETURN_IF_ERROR(expr) \
  do {                           \
    Status _st = (expr);         \
    if (!_st.ok()) return _st;   \
  } while (0)
