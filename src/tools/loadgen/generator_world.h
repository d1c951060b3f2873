// The trace generator's fixed world (generator.h describes it): services,
// their pods, the gateway's routes, the clients' values, and the text helpers
// names and ids are written with. The same whatever the seed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/value_text.h"

namespace spanhouse::loadgen::corpus {

enum Svc : uint8_t {
  kGateway,
  kFrontend,
  kCart,
  kCheckout,
  kPayment,
  kInventory,
  kCatalog,
  kUser,
  kShipping,
  kRecommendation,
  kEmail,
  kSearch,
  kServiceCount
};

struct ServiceDef {
  const char* name;
  const char* version;
  const char* language;  // telemetry.sdk.language
  const char* sdk_version;
  const char* scope;
  const char* scope_version;
  int pods;
  int port;
  const char* code_namespace;
  const char* thread_prefix;  // thread.name is this and a number; none for go / nodejs
};

inline constexpr ServiceDef kServices[kServiceCount] = {
    {"api-gateway", "2.14.1", "go", "1.24.0",
     "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", "0.49.0", 48, 8080,
     "github.com/shop/gateway/internal/proxy", nullptr},
    {"frontend", "5.3.0", "nodejs", "1.24.1", "@opentelemetry/instrumentation-http", "0.51.1", 40,
     8080, "frontend/src/handlers", nullptr},
    {"cart", "1.9.2", "dotnet", "1.8.1", "OpenTelemetry.Instrumentation.AspNetCore", "1.8.1", 24,
     7070, "Shop.Cart.Services", ".NET TP Worker #"},
    {"checkout", "3.2.0", "go", "1.24.0",
     "go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc", "0.49.0", 24,
     5050, "github.com/shop/checkout/internal/order", nullptr},
    {"payment", "2.0.7", "nodejs", "1.24.1", "@opentelemetry/instrumentation-grpc", "0.51.1", 16,
     50051, "payment/src/charge", nullptr},
    {"inventory", "4.1.3", "java", "1.38.0", "io.opentelemetry.grpc-1.6", "2.4.0-alpha", 24, 9090,
     "com.shop.inventory.StockService", "grpc-default-executor-"},
    {"catalog", "7.12.0", "java", "1.38.0", "io.opentelemetry.grpc-1.6", "2.4.0-alpha", 32, 3550,
     "com.shop.catalog.ProductService", "grpc-default-executor-"},
    {"user", "1.22.4", "python", "1.24.0", "opentelemetry.instrumentation.grpc", "0.45b0", 20,
     50052, "user_service.handlers", "ThreadPoolExecutor-0_"},
    {"shipping", "0.9.3", "rust", "0.23.0", "opentelemetry-grpc", "0.16.0", 12, 50053,
     "shipping::quote", "tokio-runtime-worker-"},
    {"recommendation", "2.4.1", "python", "1.24.0", "opentelemetry.instrumentation.grpc", "0.45b0",
     20, 8080, "recommendation.server", "ThreadPoolExecutor-0_"},
    {"email", "1.3.0", "ruby", "1.4.0", "OpenTelemetry::Instrumentation::RubyKafka", "0.21.0", 8,
     6060, "Email::OrderConfirmation", "puma srv tp "},
    {"search", "3.8.5", "java", "1.38.0", "io.opentelemetry.grpc-1.6", "2.4.0-alpha", 28, 9200,
     "com.shop.search.SearchService", "grpc-default-executor-"},
};

struct Pod {
  std::string name;  // k8s.pod.name
  std::string uid;   // service.instance.id
  std::string node;  // host.name, k8s.node.name
  std::string ip;    // network.peer.address of calls to it
};

enum class Flow : uint8_t {
  kHome,
  kProduct,
  kBrowse,
  kSearch,
  kSuggest,
  kCartView,
  kCartAdd,
  kCartRemove,
  kCheckout,
  kOrderStatus,
  kOrderList,
  kOrderCancel,
  kLogin,
  kProfile,
  kRecs,
  kShipQuote,
  kReview,
};

struct BaseRoute {
  const char* method;
  const char* path;  // after the version prefix; {sku}, {order_id}, {category} are filled in
  Flow flow;
  double weight;
  int ok_status;
};

// 20 routes x 3 prefixes = 60 gateway routes.
inline constexpr BaseRoute kBaseRoutes[] = {
    {"GET", "/home", Flow::kHome, 10, 200},
    {"GET", "/products/{sku}", Flow::kProduct, 22, 200},
    {"GET", "/products/{sku}/details", Flow::kProduct, 8, 200},
    {"GET", "/products", Flow::kBrowse, 6, 200},
    {"GET", "/categories/{category}/products", Flow::kBrowse, 6, 200},
    {"GET", "/search", Flow::kSearch, 12, 200},
    {"GET", "/search/suggest", Flow::kSuggest, 8, 200},
    {"GET", "/cart", Flow::kCartView, 8, 200},
    {"POST", "/cart/items", Flow::kCartAdd, 4, 201},
    {"PUT", "/cart/items/{sku}", Flow::kCartAdd, 2, 200},
    {"DELETE", "/cart/items/{sku}", Flow::kCartRemove, 1, 204},
    {"POST", "/checkout", Flow::kCheckout, 3, 201},
    {"GET", "/orders/{order_id}", Flow::kOrderStatus, 2, 200},
    {"GET", "/orders", Flow::kOrderList, 2, 200},
    {"POST", "/orders/{order_id}/cancel", Flow::kOrderCancel, 0.5, 200},
    {"POST", "/login", Flow::kLogin, 3, 200},
    {"GET", "/users/me", Flow::kProfile, 4, 200},
    {"GET", "/recommendations", Flow::kRecs, 5, 200},
    {"GET", "/shipping/quote", Flow::kShipQuote, 2, 200},
    {"POST", "/products/{sku}/reviews", Flow::kReview, 1, 201},
};

struct Prefix {
  const char* path;
  double weight;
};
inline constexpr Prefix kPrefixes[] = {{"/api/v1", 0.6}, {"/api/v2", 0.3}, {"/m/api/v1", 0.1}};

struct Route {
  const BaseRoute* base;
  std::string route;  // http.route, e.g. /api/v1/products/{sku}
  std::string name;   // span name, e.g. GET /api/v1/products/{sku}
  double cumulative;  // for weighted choice
};

inline constexpr const char* kUserAgents[] = {
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.67",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
    "Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.6367.113 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 13; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/123.0.6312.118 Mobile Safari/537.36",
    "ShopApp/4.12.0 (iPhone; iOS 17.4.1; Scale/3.00)",
    "ShopApp/4.11.2 (iPhone; iOS 16.7.7; Scale/2.00)",
    "ShopApp/4.12.0 (Android 14; Pixel 7 Pro)",
    "ShopApp/4.10.5 (Android 12; SM-A525F)",
    "curl/8.5.0",
};
// The fresh corpus's user agents: per family (an index into kUserAgents, whose
// channel and client version they keep) kAgentsPerFamily strings made of
// browser, OS, device and version parts, so a real population's thousands of
// distinct strings. Rank 0 is the family's most common; the same (family,
// rank) gives the same string.
inline constexpr uint32_t kAgentsPerFamily = 4096;
void AppendUserAgent(std::string& out, uint32_t family, uint32_t rank);

inline constexpr const char* kChannels[] = {"web", "web", "web", "web",     "web",     "web",
                                            "web", "ios", "ios", "android", "android", "api"};

// Per user agent above: the web bundle or the app build.
inline constexpr const char* kClientVersions[] = {
    "web-2024.05.2", "web-2024.05.2",  "web-2024.05.1",  "web-2024.05.2",
    "web-2024.05.2", "web-2024.05.1",  "web-2024.04.9",  "ios-4.12.0",
    "ios-4.11.2",    "android-4.12.0", "android-4.10.5", "api-v1"};
inline constexpr const char* kRegions[] = {"us-east-1", "us-west-2", "eu-west-1", "eu-central-1",
                                           "ap-southeast-1"};
inline constexpr const char* kBuckets[] = {"control", "variant-a", "variant-b"};
inline constexpr const char* kCategories[] = {
    "shoes",   "jackets", "shirts",  "pants",    "socks",   "hats",   "bags",    "watches",
    "phones",  "laptops", "tablets", "cameras",  "audio",   "gaming", "kitchen", "garden",
    "tools",   "toys",    "books",   "music",    "movies",  "beauty", "health",  "sports",
    "outdoor", "camping", "cycling", "fitness",  "office",  "pets",   "baby",    "grocery",
    "coffee",  "tea",     "wine",    "lighting", "bedding", "bath",   "decor",   "jewelry"};
inline constexpr const char* kWords[] = {
    "red",    "blue",    "black",      "white",   "running",  "trail",    "leather", "wool",
    "cotton", "slim",    "classic",    "vintage", "wireless", "usb-c",    "4k",      "pro",
    "mini",   "max",     "kids",       "mens",    "womens",   "winter",   "summer",  "rain",
    "jacket", "shoes",   "boots",      "shirt",   "hoodie",   "backpack", "watch",   "phone",
    "case",   "charger", "headphones", "speaker", "lamp",     "chair",    "desk",    "mug",
    "kettle", "knife",   "pan",        "tent",    "bike",     "helmet",   "yoga",    "mat"};

// The pods of every service and the 60 gateway routes, drawn from a seed of
// their own.
struct World {
  World();

  std::array<std::vector<Pod>, kServiceCount> pods;
  std::vector<Route> routes;
};

// Small integer -> zero-padded decimal of `width` digits, appended.
inline void AppendPadded(std::string& out, uint64_t v, int width) {
  char buf[24];
  int n = 0;
  do {
    buf[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = n; i < width; ++i) out += '0';
  while (n > 0) out += buf[--n];
}

inline void AppendHex(std::string& out, uint64_t v, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(v >> (4 * i)) & 0xf];
}

inline void AppendIpv4(std::string& out, uint32_t ip) {
  for (int i = 3; i >= 0; --i) {
    codec::AppendInt(out, (ip >> (8 * i)) & 0xff);
    if (i > 0) out += '.';
  }
}

// A random (version 4) UUID made of the bits of `a` and `b`.
inline void AppendUuid(std::string& out, uint64_t a, uint64_t b) {
  AppendHex(out, a >> 32, 8);
  out += '-';
  AppendHex(out, (a >> 16) & 0xffff, 4);
  out += "-4";
  AppendHex(out, a & 0xfff, 3);
  out += '-';
  AppendHex(out, 0x8000 | ((b >> 48) & 0x3fff), 4);
  out += '-';
  AppendHex(out, b & 0xffffffffffffull, 12);
}

}  // namespace spanhouse::loadgen::corpus
