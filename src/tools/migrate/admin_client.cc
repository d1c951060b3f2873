#include "tools/migrate/admin_client.h"

#include <simdjson.h>

#include <charconv>
#include <ctime>
#include <thread>

namespace spanhouse::migrate {

namespace {

std::string Reason(const net::HttpResult& r) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view msg;
  if (parser.parse(r.body).get(doc) == simdjson::SUCCESS &&
      doc["errors"].at(0)["msg"].get_string().get(msg) == simdjson::SUCCESS) {
    return "HTTP " + std::to_string(r.status) + ": " + std::string(msg);
  }
  return "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300);
}

}  // namespace

Status AdminClient::Open(const std::string& url, const std::string& token,
                         const std::string& ca_file, std::unique_ptr<AdminClient>* out) {
  net::HttpUrl u;
  std::string error;
  if (!net::ParseHttpUrl(url, &u, &error, /*allow_https=*/true)) {
    return Status::Invalid("--server: " + error);
  }
  net::HttpClientOptions o;
  o.timeout = std::chrono::seconds(300);
  o.max_body_bytes = 512u << 20;
  o.tls_ca_file = ca_file;
  if (!token.empty()) o.extra_headers.emplace_back("Authorization", "Bearer " + token);
  std::unique_ptr<AdminClient> c(new AdminClient());
  c->base_ = u.target == "/" ? "" : u.target;
  if (!c->base_.empty() && c->base_.back() == '/') c->base_.pop_back();
  c->client_ = std::make_unique<net::HttpClient>(u, std::move(o));
  *out = std::move(c);
  return Status::Ok();
}

Status AdminClient::Get(const std::string& target, std::string* body) {
  net::HttpResult r;
  if (!client_->Get(base_ + target, &r)) {
    return Status::Unavailable("spanhouse did not answer " + target + ": " + r.error);
  }
  if (r.status != 200) return Status::Unavailable(target + ": " + Reason(r));
  *body = std::move(r.body);
  return Status::Ok();
}

Status AdminClient::PostNdjson(const std::string& target, std::string body, std::string* answer,
                               int attempts) {
  for (int i = 0;; ++i) {
    net::HttpResult r;
    const bool answered =
        client_->PostTo(base_ + target, &body, {{"Content-Type", "application/x-ndjson"}}, &r);
    if (answered && r.status == 200) {
      *answer = std::move(r.body);
      return Status::Ok();
    }
    const std::string why = answered ? Reason(r) : "no answer: " + r.error;
    if ((answered && r.status != 503) || i + 1 >= attempts) {
      return Status::Unavailable(target + ": " + why);
    }
    const double wait = answered && r.retry_after_s > 0 ? r.retry_after_s : 1.0;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 30.0)));
  }
}

bool ParseTime(std::string_view text, uint64_t* unix_us) {
  if (text.empty()) return false;
  uint64_t secs = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), secs);
  if (res.ec == std::errc() && res.ptr == text.data() + text.size()) {
    *unix_us = secs * 1000000ull;
    return true;
  }
  std::tm tm{};
  std::string s(text);
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return false;
  uint64_t frac_us = 0;
  if (*end == '.') {
    ++end;
    uint64_t scale = 100000;
    while (*end >= '0' && *end <= '9') {
      frac_us += static_cast<uint64_t>(*end - '0') * scale;
      scale /= 10;
      ++end;
    }
  }
  if (*end == 'Z') ++end;
  if (*end != '\0') return false;
  const time_t t = timegm(&tm);
  if (t < 0) return false;
  *unix_us = static_cast<uint64_t>(t) * 1000000ull + frac_us;
  return true;
}

std::string FormatTime(uint64_t unix_us) {
  const auto t = static_cast<time_t>(unix_us / 1000000ull);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool ParseDuration(std::string_view text, uint64_t* seconds) {
  if (text.empty()) return false;
  uint64_t unit = 1;
  switch (text.back()) {
    case 's':
      text.remove_suffix(1);
      break;
    case 'm':
      unit = 60;
      text.remove_suffix(1);
      break;
    case 'h':
      unit = 3600;
      text.remove_suffix(1);
      break;
    case 'd':
      unit = 86400;
      text.remove_suffix(1);
      break;
    default:
      break;
  }
  uint64_t n = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), n);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || n == 0) return false;
  *seconds = n * unit;
  return true;
}

}  // namespace spanhouse::migrate
