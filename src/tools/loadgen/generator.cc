// The trace generator (see generator.h for the shape of the corpus).
//
// A trace is first built into scratch records owned by the generator (spans,
// attributes, events, links and one text buffer, all reused from trace to
// trace), then written to the SpanBatch grouped by resource. Building in
// scratch lets a failure found late (an error, a 404) rewrite attributes of
// spans written earlier, and lets the batch hold each resource's spans
// together whatever order the call tree visited them in.
#include "tools/loadgen/generator.h"

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codec/value_text.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {
namespace {

// ---------------------------------------------------------------------------
// The fixed world: services, pods, routes, databases.

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

constexpr ServiceDef kServices[kServiceCount] = {
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

struct RpcMethod {
  const char* full;  // span name
  const char* service;
  const char* method;
};

constexpr RpcMethod kListProducts{"oteldemo.CatalogService/ListProducts", "oteldemo.CatalogService",
                                  "ListProducts"};
constexpr RpcMethod kGetProduct{"oteldemo.CatalogService/GetProduct", "oteldemo.CatalogService",
                                "GetProduct"};
constexpr RpcMethod kGetProducts{"oteldemo.CatalogService/GetProducts", "oteldemo.CatalogService",
                                 "GetProducts"};
constexpr RpcMethod kAddReview{"oteldemo.CatalogService/AddReview", "oteldemo.CatalogService",
                               "AddReview"};
constexpr RpcMethod kListRecs{"oteldemo.RecommendationService/ListRecommendations",
                              "oteldemo.RecommendationService", "ListRecommendations"};
constexpr RpcMethod kGetStock{"oteldemo.InventoryService/GetStock", "oteldemo.InventoryService",
                              "GetStock"};
constexpr RpcMethod kReserve{"oteldemo.InventoryService/Reserve", "oteldemo.InventoryService",
                             "Reserve"};
constexpr RpcMethod kSearchMethod{"oteldemo.SearchService/Search", "oteldemo.SearchService",
                                  "Search"};
constexpr RpcMethod kSuggest{"oteldemo.SearchService/Suggest", "oteldemo.SearchService", "Suggest"};
constexpr RpcMethod kGetCart{"oteldemo.CartService/GetCart", "oteldemo.CartService", "GetCart"};
constexpr RpcMethod kAddItem{"oteldemo.CartService/AddItem", "oteldemo.CartService", "AddItem"};
constexpr RpcMethod kRemoveItem{"oteldemo.CartService/RemoveItem", "oteldemo.CartService",
                                "RemoveItem"};
constexpr RpcMethod kEmptyCart{"oteldemo.CartService/EmptyCart", "oteldemo.CartService",
                               "EmptyCart"};
constexpr RpcMethod kPlaceOrder{"oteldemo.CheckoutService/PlaceOrder", "oteldemo.CheckoutService",
                                "PlaceOrder"};
constexpr RpcMethod kGetOrder{"oteldemo.CheckoutService/GetOrder", "oteldemo.CheckoutService",
                              "GetOrder"};
constexpr RpcMethod kListOrders{"oteldemo.CheckoutService/ListOrders", "oteldemo.CheckoutService",
                                "ListOrders"};
constexpr RpcMethod kCancelOrder{"oteldemo.CheckoutService/CancelOrder", "oteldemo.CheckoutService",
                                 "CancelOrder"};
constexpr RpcMethod kCharge{"oteldemo.PaymentService/Charge", "oteldemo.PaymentService", "Charge"};
constexpr RpcMethod kGetQuote{"oteldemo.ShippingService/GetQuote", "oteldemo.ShippingService",
                              "GetQuote"};
constexpr RpcMethod kTrackOrder{"oteldemo.ShippingService/TrackOrder", "oteldemo.ShippingService",
                                "TrackOrder"};
constexpr RpcMethod kLogin{"oteldemo.UserService/Login", "oteldemo.UserService", "Login"};
constexpr RpcMethod kGetUser{"oteldemo.UserService/GetUser", "oteldemo.UserService", "GetUser"};

struct DbDef {
  const char* system;
  const char* name;  // db.name; for redis the database index
  const char* address;
  int port;
  const char* user;  // db.user; none for redis
  const char* ip;
  double median_us;  // typical duration of one statement
};

constexpr DbDef kCatalogDb{"postgresql", "catalog",     "catalog-db.shop.svc.cluster.local",
                           5432,         "catalog_svc", "10.4.12.31",
                           1800};
constexpr DbDef kOrdersDb{"postgresql", "orders",       "orders-db.shop.svc.cluster.local",
                          5432,         "checkout_svc", "10.4.12.47",
                          2500};
constexpr DbDef kInventoryDb{"postgresql", "inventory",     "inventory-db.shop.svc.cluster.local",
                             5432,         "inventory_svc", "10.4.13.8",
                             1500};
constexpr DbDef kUsersDb{"postgresql", "users", "users-db.shop.svc.cluster.local", 5432, "user_svc",
                         "10.4.13.22", 1200};
constexpr DbDef kCartRedis{"redis",     "0", "redis-cart.shop.svc.cluster.local", 6379, nullptr,
                           "10.4.14.5", 250};
constexpr DbDef kCacheRedis{"redis",     "1", "redis-cache.shop.svc.cluster.local", 6379, nullptr,
                            "10.4.14.9", 200};
constexpr DbDef kSearchMongo{"mongodb", "search",     "mongo-search.shop.svc.cluster.local",
                             27017,     "search_svc", "10.4.15.3",
                             3500};
constexpr DbDef kReviewsMongo{"mongodb", "reviews",     "mongo-reviews.shop.svc.cluster.local",
                              27017,     "catalog_svc", "10.4.15.11",
                              2800};

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
constexpr BaseRoute kBaseRoutes[] = {
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
constexpr Prefix kPrefixes[] = {{"/api/v1", 0.6}, {"/api/v2", 0.3}, {"/m/api/v1", 0.1}};

struct Route {
  const BaseRoute* base;
  std::string route;  // http.route, e.g. /api/v1/products/{sku}
  std::string name;   // span name, e.g. GET /api/v1/products/{sku}
  double cumulative;  // for weighted choice
};

constexpr const char* kUserAgents[] = {
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
constexpr const char* kChannels[] = {"web", "web", "web", "web",     "web",     "web",
                                     "web", "ios", "ios", "android", "android", "api"};

// Per user agent above: the web bundle or the app build.
constexpr const char* kClientVersions[] = {"web-2024.05.2",  "web-2024.05.2",  "web-2024.05.1",
                                           "web-2024.05.2",  "web-2024.05.2",  "web-2024.05.1",
                                           "web-2024.04.9",  "ios-4.12.0",     "ios-4.11.2",
                                           "android-4.12.0", "android-4.10.5", "api-v1"};
constexpr const char* kRegions[] = {"us-east-1", "us-west-2", "eu-west-1", "eu-central-1",
                                    "ap-southeast-1"};
constexpr const char* kBuckets[] = {"control", "variant-a", "variant-b"};
constexpr const char* kCategories[] = {
    "shoes",   "jackets", "shirts",  "pants",    "socks",   "hats",   "bags",    "watches",
    "phones",  "laptops", "tablets", "cameras",  "audio",   "gaming", "kitchen", "garden",
    "tools",   "toys",    "books",   "music",    "movies",  "beauty", "health",  "sports",
    "outdoor", "camping", "cycling", "fitness",  "office",  "pets",   "baby",    "grocery",
    "coffee",  "tea",     "wine",    "lighting", "bedding", "bath",   "decor",   "jewelry"};
constexpr const char* kWords[] = {
    "red",    "blue",    "black",      "white",   "running",  "trail",    "leather", "wool",
    "cotton", "slim",    "classic",    "vintage", "wireless", "usb-c",    "4k",      "pro",
    "mini",   "max",     "kids",       "mens",    "womens",   "winter",   "summer",  "rain",
    "jacket", "shoes",   "boots",      "shirt",   "hoodie",   "backpack", "watch",   "phone",
    "case",   "charger", "headphones", "speaker", "lamp",     "chair",    "desk",    "mug",
    "kettle", "knife",   "pan",        "tent",    "bike",     "helmet",   "yoga",    "mat"};

// Failure texts for the error injected into ~1% of traces.
struct Failure {
  const char* status;  // status message
  const char* type;    // exception.type
};
constexpr Failure kDbFailures[] = {
    {"ERROR: deadlock detected", "DeadlockDetected"},
    {"ERROR: canceling statement due to statement timeout", "QueryCanceled"},
    {"connection refused", "ConnectionRefusedError"},
    {"too many clients already", "TooManyConnections"},
};
constexpr Failure kRedisFailures[] = {
    {"READONLY You can't write against a read only replica.", "RedisReadOnlyError"},
    {"Timeout performing GET (5000ms)", "RedisTimeoutException"},
    {"LOADING Redis is loading the dataset in memory", "RedisBusyLoadingError"},
};
constexpr Failure kInternalFailures[] = {
    {"index out of range [3] with length 3", "runtime.Error"},
    {"Cannot read properties of undefined (reading 'price')", "TypeError"},
    {"Object reference not set to an instance of an object.", "NullReferenceException"},
    {"card declined: insufficient funds", "PaymentDeclined"},
    {"upstream request timeout", "TimeoutError"},
};

// Small integer -> zero-padded decimal of `width` digits, appended.
void AppendPadded(std::string& out, uint64_t v, int width) {
  char buf[24];
  int n = 0;
  do {
    buf[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = n; i < width; ++i) out += '0';
  while (n > 0) out += buf[--n];
}

void AppendHex(std::string& out, uint64_t v, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(v >> (4 * i)) & 0xf];
}

void AppendIpv4(std::string& out, uint32_t ip) {
  for (int i = 3; i >= 0; --i) {
    codec::AppendInt(out, (ip >> (8 * i)) & 0xff);
    if (i > 0) out += '.';
  }
}

// ---------------------------------------------------------------------------
// Scratch records of the traces being built.

struct AttrRec {
  std::string_view key;
  ValueType type;
  uint32_t off;  // value text in Impl::text
  uint32_t len;
};

struct EventRec {
  uint64_t time;
  std::string_view name;
  uint32_t attr_begin;  // into Impl::event_attrs
  uint32_t attr_end;
};

struct LinkRec {
  TraceId trace_id;
  SpanId span_id;
};

struct SpanRec {
  uint8_t svc;
  uint16_t pod;
  int32_t parent;  // index into Impl::spans, -1 for the root
  TraceId trace_id;
  SpanId id;
  SpanId parent_id;
  std::string_view name;
  SpanKind kind;
  uint64_t start;
  uint64_t end;
  StatusCodeOtlp status;
  std::string_view status_message;
  uint32_t attr_begin, attr_end;
  uint32_t event_begin, event_end;
  uint32_t link_begin, link_end;
  bool has_child;
};

// app.* fields a span may carry beyond the per-trace ones every span has.
enum Field : uint32_t {
  kFSku = 1,
  kFQty = 2,
  kFPrice = 4,
  kFOrder = 8,
  kFFlag = 16,
  kFQuery = 32,
  kFCategory = 64,
};

constexpr uint32_t kMaxSpans = 30;
constexpr uint64_t kUs = 1000;

}  // namespace

struct TraceGenerator::Impl {
  explicit Impl(uint64_t seed) : rng(seed) { BuildWorld(); }

  Rng rng;
  std::string run_id;

  // ---- the world ----
  std::array<std::vector<Pod>, kServiceCount> pods;
  std::vector<Route> routes;

  // ---- scratch ----
  std::vector<SpanRec> spans;
  std::vector<AttrRec> attrs;
  std::vector<AttrRec> event_attrs;
  std::vector<EventRec> events;
  std::vector<LinkRec> links;
  std::string text;
  std::vector<AttrRec>* target = &attrs;  // where A*() appends
  // Pods this call may use per service (AppendTraces), empty = any pod.
  std::array<std::vector<uint16_t>, kServiceCount> pod_pool;
  std::vector<uint32_t> groups;      // (svc << 16 | pod) in order of first use
  std::vector<uint32_t> span_group;  // per span, index into groups
  std::string stmt;                  // db.statement being built

  // ---- the trace being built ----
  struct Ctx {
    TraceId trace_id;
    uint32_t first;  // its first span in `spans`
    uint32_t user;
    uint64_t session[2];
    uint64_t request[2];
    uint32_t client_ip;
    uint32_t ua;
    uint32_t region;
    uint32_t bucket;
    uint32_t store;
    uint32_t sku;
    uint32_t category;
    int64_t order_id;
    int cart_items;
    double price;
    bool flag;
    const Route* route;
    std::array<int32_t, kServiceCount> pod;
  } ctx{};

  void BuildWorld() {
    Rng w(0x5eedf00dcafe1234ull);  // the world is the same whatever the seed
    static constexpr char kAlnum[] = "bcdfghjklmnpqrstvwxz2456789";
    std::vector<std::string> nodes;
    for (int i = 0; i < 64; ++i) {
      std::string n = "ip-10-0-";
      codec::AppendInt(n, w.Below(64));
      n += '-';
      codec::AppendInt(n, 1 + w.Below(254));
      n += ".ec2.internal";
      nodes.push_back(std::move(n));
    }
    for (int s = 0; s < kServiceCount; ++s) {
      std::string rs;
      for (int i = 0; i < 10; ++i) rs += kAlnum[w.Below(sizeof(kAlnum) - 1)];
      for (int p = 0; p < kServices[s].pods; ++p) {
        Pod pod;
        pod.name = std::string(kServices[s].name) + "-" + rs + "-";
        for (int i = 0; i < 5; ++i) pod.name += kAlnum[w.Below(sizeof(kAlnum) - 1)];
        const uint64_t a = w.Next();
        const uint64_t b = w.Next();
        AppendHex(pod.uid, a >> 32, 8);
        pod.uid += '-';
        AppendHex(pod.uid, (a >> 16) & 0xffff, 4);
        pod.uid += "-4";
        AppendHex(pod.uid, a & 0xfff, 3);
        pod.uid += '-';
        AppendHex(pod.uid, 0x8000 | ((b >> 48) & 0x3fff), 4);
        pod.uid += '-';
        AppendHex(pod.uid, b & 0xffffffffffffull, 12);
        pod.node = nodes[w.Below(static_cast<uint32_t>(nodes.size()))];
        AppendIpv4(pod.ip, (10u << 24) | ((1 + w.Below(3)) << 16) | (w.Below(256) << 8) |
                               (1 + w.Below(254)));
        pods[s].push_back(std::move(pod));
      }
    }
    double total = 0;
    for (const Prefix& p : kPrefixes) {
      for (const BaseRoute& b : kBaseRoutes) {
        Route r;
        r.base = &b;
        r.route = std::string(p.path) + b.path;
        r.name = std::string(b.method) + " " + r.route;
        total += b.weight * p.weight;
        r.cumulative = total;
        routes.push_back(std::move(r));
      }
    }
    for (Route& r : routes) r.cumulative /= total;
  }

  // ---- random values ----

  TraceId NewTraceId() {
    TraceId id;
    uint64_t a, b;
    do {
      a = rng.Next();
      b = rng.Next();
    } while (a == 0 && b == 0);
    std::memcpy(id.data(), &a, 8);
    std::memcpy(id.data() + 8, &b, 8);
    return id;
  }

  SpanId NewSpanId() {
    SpanId id;
    uint64_t a;
    do a = rng.Next();
    while (a == 0);
    std::memcpy(id.data(), &a, 8);
    return id;
  }

  // A duration in ns: log-normal around `median_us`, with a rare 10x outlier.
  uint64_t Dur(double median_us, double sigma = 0.6) {
    double us = rng.LogNormal(median_us, sigma);
    if (rng.Chance(0.005)) us *= 10;
    return static_cast<uint64_t>(us * kUs) + 1;
  }
  uint64_t Net() { return Dur(300, 0.5); }

  const Route& PickRoute() {
    const double u = rng.Uniform();
    for (const Route& r : routes) {
      if (u < r.cumulative) return r;
    }
    return routes.back();
  }

  uint16_t PodFor(Svc s) {
    if (ctx.pod[s] < 0) {
      const std::vector<uint16_t>& pool = pod_pool[s];
      ctx.pod[s] = pool.empty() ? static_cast<int32_t>(rng.Below(kServices[s].pods))
                                : pool[rng.Below(static_cast<uint32_t>(pool.size()))];
    }
    return static_cast<uint16_t>(ctx.pod[s]);
  }
  const Pod& PodOf(Svc s) { return pods[s][PodFor(s)]; }

  // ---- attributes (appended to *target) ----

  uint32_t Mark() const { return static_cast<uint32_t>(text.size()); }
  void Push(std::string_view key, ValueType type, uint32_t begin) {
    target->push_back(AttrRec{key, type, begin, static_cast<uint32_t>(text.size()) - begin});
  }
  void AStr(std::string_view key, std::string_view v) {
    const uint32_t b = Mark();
    text += v;
    Push(key, ValueType::kString, b);
  }
  void AInt(std::string_view key, int64_t v) {
    const uint32_t b = Mark();
    codec::AppendInt(text, v);
    Push(key, ValueType::kInt, b);
  }
  void ADouble(std::string_view key, double v) {
    const uint32_t b = Mark();
    codec::AppendDouble(text, v);
    Push(key, ValueType::kDouble, b);
  }
  void ABool(std::string_view key, bool v) {
    const uint32_t b = Mark();
    text += v ? "true" : "false";
    Push(key, ValueType::kBool, b);
  }
  void AIp(std::string_view key, uint32_t ip) {
    const uint32_t b = Mark();
    AppendIpv4(text, ip);
    Push(key, ValueType::kString, b);
  }
  void AUser(std::string_view key) {
    const uint32_t b = Mark();
    text += "user-";
    AppendPadded(text, ctx.user, 6);
    Push(key, ValueType::kString, b);
  }
  void ASku(std::string_view key) {
    const uint32_t b = Mark();
    text += "SKU-";
    AppendPadded(text, ctx.sku, 5);
    Push(key, ValueType::kString, b);
  }
  void AQuery(std::string_view key) {
    // 1-3 words drawn from the trace's sku, so a trace is self-consistent.
    const uint32_t b = Mark();
    uint32_t x = ctx.sku * 2654435761u;
    const int n = 1 + static_cast<int>(ctx.sku % 3);
    for (int i = 0; i < n; ++i) {
      if (i > 0) text += ' ';
      text += kWords[(x >> (8 * i)) % std::size(kWords)];
    }
    Push(key, ValueType::kString, b);
  }

  // Rewrites the value of `key` on span `i`, if it has one.
  void SetAttr(uint32_t i, std::string_view key, ValueType type, std::string_view value) {
    for (uint32_t a = spans[i].attr_begin; a < spans[i].attr_end; ++a) {
      if (attrs[a].key == key) {
        const uint32_t b = Mark();
        text += value;
        attrs[a].type = type;
        attrs[a].off = b;
        attrs[a].len = static_cast<uint32_t>(text.size()) - b;
        return;
      }
    }
  }

  // ---- spans ----

  uint32_t Open(Svc svc, SpanKind kind, std::string_view name, int32_t parent, uint64_t start) {
    SpanRec s{};
    s.svc = svc;
    s.pod = PodFor(svc);
    s.parent = parent;
    s.trace_id = ctx.trace_id;
    s.id = NewSpanId();
    if (parent >= 0) {
      s.parent_id = spans[parent].id;
      spans[parent].has_child = true;
    }
    s.name = name;
    s.kind = kind;
    s.start = start;
    s.end = start;
    s.status = StatusCodeOtlp::kUnset;
    s.attr_begin = s.attr_end = static_cast<uint32_t>(attrs.size());
    s.event_begin = s.event_end = static_cast<uint32_t>(events.size());
    s.link_begin = s.link_end = static_cast<uint32_t>(links.size());
    spans.push_back(s);
    return static_cast<uint32_t>(spans.size() - 1);
  }

  // Ends span `i`'s attribute list: the per-trace fields every span carries
  // (as a baggage span processor would copy them) and the app.* `fields`.
  void Seal(uint32_t i, uint32_t fields) {
    AUser("app.user_id");
    {
      const uint32_t b = Mark();
      AppendHex(text, ctx.session[0], 16);
      AppendHex(text, ctx.session[1], 16);
      Push("app.session_id", ValueType::kString, b);
    }
    {
      const uint32_t b = Mark();
      AppendHex(text, ctx.request[0] >> 32, 8);
      text += '-';
      AppendHex(text, (ctx.request[0] >> 16) & 0xffff, 4);
      text += "-4";
      AppendHex(text, ctx.request[0] & 0xfff, 3);
      text += '-';
      AppendHex(text, 0x8000 | ((ctx.request[1] >> 48) & 0x3fff), 4);
      text += '-';
      AppendHex(text, ctx.request[1] & 0xffffffffffffull, 12);
      Push("app.request_id", ValueType::kString, b);
    }
    AStr("app.channel", kChannels[ctx.ua]);
    AStr("app.region", kRegions[ctx.region]);
    AInt("app.store_id", ctx.store);
    AStr("app.experiment_bucket", kBuckets[ctx.bucket]);
    AStr("app.client_version", kClientVersions[ctx.ua]);
    if (fields & kFSku) ASku("app.sku");
    if (fields & kFQty) AInt("app.cart_items", ctx.cart_items);
    if (fields & kFPrice) ADouble("app.price", ctx.price);
    if (fields & kFOrder) AInt("app.order_id", ctx.order_id);
    if (fields & kFFlag) ABool("app.feature_flag", ctx.flag);
    if (fields & kFQuery) AQuery("app.search.query");
    if (fields & kFCategory) AStr("app.category", kCategories[ctx.category]);
    spans[i].attr_end = static_cast<uint32_t>(attrs.size());
  }

  // Sets span `i`'s end; one span in ten gets an event somewhere inside it.
  void Close(uint32_t i, uint64_t end) {
    spans[i].end = end;
    if (!rng.Chance(0.1)) return;
    const SpanRec& s = spans[i];
    spans[i].event_begin = static_cast<uint32_t>(events.size());
    EventRec e{};
    e.time = s.start + static_cast<uint64_t>(rng.Uniform() * static_cast<double>(end - s.start));
    target = &event_attrs;
    e.attr_begin = static_cast<uint32_t>(event_attrs.size());
    switch (rng.Below(4)) {
      case 0:
        e.name = "cache.miss";
        {
          const uint32_t b = Mark();
          text += "product:SKU-";
          AppendPadded(text, ctx.sku, 5);
          Push("cache.key", ValueType::kString, b);
        }
        AStr("cache.name", "redis-cache");
        break;
      case 1:
        e.name = "retry";
        AInt("retry.attempt", 1 + rng.Below(3));
        AStr("retry.reason", rng.Chance(0.5) ? "UNAVAILABLE" : "DEADLINE_EXCEEDED");
        AInt("retry.backoff_ms", 25 << rng.Below(4));
        break;
      case 2:
        e.name = "feature_flag.evaluation";
        AStr("feature_flag.key", "new-checkout-flow");
        AStr("feature_flag.provider_name", "flagd");
        AStr("feature_flag.variant", ctx.flag ? "on" : "off");
        break;
      default:
        e.name = "log";
        AStr("log.severity", rng.Chance(0.8) ? "INFO" : "WARN");
        {
          const uint32_t b = Mark();
          text += "handled ";
          text += s.name;
          text += " for user-";
          AppendPadded(text, ctx.user, 6);
          text += " in ";
          codec::AppendInt(text, static_cast<int64_t>((end - s.start) / kUs));
          text += "us";
          Push("log.message", ValueType::kString, b);
        }
        break;
    }
    e.attr_end = static_cast<uint32_t>(event_attrs.size());
    target = &attrs;
    events.push_back(e);
    spans[i].event_end = static_cast<uint32_t>(events.size());
  }

  uint32_t Count() const { return static_cast<uint32_t>(spans.size()) - ctx.first; }
  bool Room(uint32_t n) const { return Count() + n <= kMaxSpans; }

  void ThreadAttrs(Svc s) {
    AInt("thread.id", 1 + rng.Below(64));
    if (kServices[s].thread_prefix != nullptr) {
      const uint32_t b = Mark();
      text += kServices[s].thread_prefix;
      codec::AppendInt(text, rng.Below(32));
      Push("thread.name", ValueType::kString, b);
    }
  }

  void RpcAttrs(Svc callee, const RpcMethod& m, bool server, const Pod& peer) {
    AStr("rpc.system", "grpc");
    AStr("rpc.service", m.service);
    AStr("rpc.method", m.method);
    AInt("rpc.grpc.status_code", 0);
    AStr("server.address", kServices[callee].name);
    AInt("server.port", kServices[callee].port);
    AStr("network.peer.address", peer.ip);
    AInt("network.peer.port", server ? 32768 + rng.Below(28000) : kServices[callee].port);
    AStr("network.transport", "tcp");
    AStr("network.type", "ipv4");
  }

  // A gRPC call from span `parent`'s service to `to`. `body(server_span, t)`
  // does the server's work from time t and returns when it ended.
  template <typename Body>
  uint64_t Rpc(uint32_t parent, Svc to, const RpcMethod& m, uint32_t fields, uint64_t t,
               Body&& body) {
    const Svc from = static_cast<Svc>(spans[parent].svc);
    const uint32_t c = Open(from, SpanKind::kClient, m.full, static_cast<int32_t>(parent), t);
    RpcAttrs(to, m, false, PodOf(to));
    Seal(c, fields);
    const uint64_t t0 = t + Net();
    const uint32_t s = Open(to, SpanKind::kServer, m.full, static_cast<int32_t>(c), t0);
    RpcAttrs(to, m, true, PodOf(from));
    ThreadAttrs(to);
    Seal(s, fields);
    uint64_t t1 = body(s, t0 + Dur(25));
    t1 += Dur(30);
    Close(s, t1);
    const uint64_t end = t1 + Net();
    Close(c, end);
    return end;
  }

  // Rpc with nothing inside but the server's own work.
  uint64_t Leaf(uint32_t parent, Svc to, const RpcMethod& m, uint32_t fields, uint64_t t,
                double work_us) {
    return Rpc(parent, to, m, fields, t, [&](uint32_t, uint64_t t1) { return t1 + Dur(work_us); });
  }

  // A database client span under `parent`. `name` is the span name, the
  // statement is in `stmt`.
  uint64_t Db(uint32_t parent, const DbDef& db, std::string_view name, std::string_view op,
              std::string_view table, const char* code_fn, uint64_t t) {
    const Svc svc = static_cast<Svc>(spans[parent].svc);
    const uint32_t d = Open(svc, SpanKind::kClient, name, static_cast<int32_t>(parent), t);
    AStr("db.system", db.system);
    const std::string_view system = db.system;
    if (system == "redis") {
      AInt("db.redis.database_index", db.name[0] - '0');
    } else {
      AStr("db.name", db.name);
      AStr("db.user", db.user);
    }
    AStr("db.operation", op);
    AStr("db.statement", stmt);
    if (system == "postgresql") AStr("db.sql.table", table);
    if (system == "mongodb") AStr("db.mongodb.collection", table);
    AStr("server.address", db.address);
    AInt("server.port", db.port);
    AStr("network.peer.address", db.ip);
    AInt("network.peer.port", db.port);
    AStr("code.namespace", kServices[svc].code_namespace);
    AStr("code.function", code_fn);
    AInt("code.lineno", 20 + rng.Below(400));
    ThreadAttrs(svc);
    Seal(d, 0);
    const uint64_t end = t + Dur(db.median_us, 0.8);
    Close(d, end);
    return end;
  }

  uint64_t Internal(uint32_t parent, std::string_view name, const char* code_fn, uint32_t fields,
                    uint64_t t, double median_us) {
    const Svc svc = static_cast<Svc>(spans[parent].svc);
    const uint32_t d = Open(svc, SpanKind::kInternal, name, static_cast<int32_t>(parent), t);
    AStr("code.namespace", kServices[svc].code_namespace);
    AStr("code.function", code_fn);
    AInt("code.lineno", 10 + rng.Below(600));
    ThreadAttrs(svc);
    Seal(d, fields);
    const uint64_t end = t + Dur(median_us, 0.7);
    Close(d, end);
    return end;
  }

  // An HTTP call to a third party (payment provider, mail service).
  uint64_t External(uint32_t parent, const char* method, const char* host, const char* path,
                    int status, uint64_t t, double median_us) {
    const Svc svc = static_cast<Svc>(spans[parent].svc);
    const uint32_t d = Open(svc, SpanKind::kClient, method, static_cast<int32_t>(parent), t);
    AStr("http.request.method", method);
    {
      const uint32_t b = Mark();
      text += "https://";
      text += host;
      text += path;
      Push("url.full", ValueType::kString, b);
    }
    AStr("server.address", host);
    AInt("server.port", 443);
    AIp("network.peer.address", static_cast<uint32_t>(rng.Next() >> 32) | 0x01000000u);
    AInt("network.peer.port", 443);
    AStr("network.protocol.version", "1.1");
    AInt("http.response.status_code", status);
    AInt("http.response.body.size", static_cast<int64_t>(rng.LogNormal(900, 0.5)));
    Seal(d, 0);
    const uint64_t end = t + Dur(median_us, 0.9);
    Close(d, end);
    return end;
  }

  void KafkaAttrs(bool consumer, uint32_t partition) {
    AStr("messaging.system", "kafka");
    AStr("messaging.destination.name", "orders");
    AStr("messaging.operation", consumer ? "process" : "publish");
    {
      const uint32_t b = Mark();
      AppendHex(text, ctx.request[0] ^ ctx.request[1], 16);
      Push("messaging.message.id", ValueType::kString, b);
    }
    {
      const uint32_t b = Mark();
      codec::AppendInt(text, ctx.order_id);
      Push("messaging.kafka.message.key", ValueType::kString, b);
    }
    AInt("messaging.kafka.destination.partition", partition);
    if (consumer) {
      AInt("messaging.kafka.message.offset", static_cast<int64_t>(rng.Next() >> 40));
      AStr("messaging.kafka.consumer.group", "order-consumers");
    }
    AStr("server.address", "kafka.shop.svc.cluster.local");
    AInt("server.port", 9092);
  }

  // Publishes the order event from span `parent`; the consumer in `consumer`
  // processes it later (async: it may outlive the producer) via `body`.
  template <typename Body>
  uint64_t Kafka(uint32_t parent, Svc consumer, uint64_t t, Body&& body) {
    const Svc svc = static_cast<Svc>(spans[parent].svc);
    const uint32_t partition = rng.Below(12);
    const uint32_t p =
        Open(svc, SpanKind::kProducer, "orders publish", static_cast<int32_t>(parent), t);
    KafkaAttrs(false, partition);
    Seal(p, kFOrder);
    const uint64_t end = t + Dur(900, 0.7);
    Close(p, end);
    const uint32_t c = Open(consumer, SpanKind::kConsumer, "orders process",
                            static_cast<int32_t>(p), t + Dur(15000, 1.0));
    KafkaAttrs(true, partition);
    Seal(c, kFOrder);
    spans[c].link_begin = static_cast<uint32_t>(links.size());
    links.push_back(LinkRec{ctx.trace_id, spans[p].id});
    spans[c].link_end = static_cast<uint32_t>(links.size());
    const uint64_t t1 = body(c, spans[c].start + Dur(40));
    Close(c, t1 + Dur(60));
    return end;
  }

  // ---- statements ----

  void Stmt(std::string_view s) { stmt.assign(s); }
  void RedisKey(const char* cmd, const char* prefix, uint64_t id, int width) {
    stmt.assign(cmd);
    stmt += ' ';
    stmt += prefix;
    AppendPadded(stmt, id, width);
  }

  // Catalog's cached product lookup: redis, and postgres on a miss.
  uint64_t CachedProduct(uint32_t s, uint64_t t, double miss) {
    RedisKey("GET", "product:SKU-", ctx.sku, 5);
    t = Db(s, kCacheRedis, "GET", "GET", "", "getCachedProduct", t);
    if (rng.Chance(miss) && Room(2)) {
      Stmt(
          "SELECT id, sku, name, description, price_cents, currency, category_id FROM products "
          "WHERE sku = $1");
      t = Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findBySku", t);
      RedisKey("SETEX", "product:SKU-", ctx.sku, 5);
      stmt += " 300 ?";
      t = Db(s, kCacheRedis, "SETEX", "SETEX", "", "cacheProduct", t);
    }
    return t;
  }

  uint64_t GetProducts(uint32_t parent, uint64_t t) {
    if (!Room(3)) return t;
    return Rpc(parent, kCatalog, kGetProducts, kFSku, t, [&](uint32_t s, uint64_t t1) {
      stmt.assign("MGET product:SKU-");
      AppendPadded(stmt, ctx.sku, 5);
      stmt += " ?";
      t1 = Db(s, kCacheRedis, "MGET", "MGET", "", "getCachedProducts", t1);
      if (rng.Chance(0.2) && Room(1)) {
        Stmt("SELECT id, sku, name, price_cents FROM products WHERE sku = ANY($1)");
        t1 = Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findAllBySku", t1);
      }
      return t1;
    });
  }

  uint64_t Recommendations(uint32_t parent, uint64_t t) {
    if (!Room(3)) return t;
    return Rpc(parent, kRecommendation, kListRecs, kFSku | kFFlag, t, [&](uint32_t s, uint64_t t1) {
      if (Room(1)) {
        t1 = Internal(s, "score candidates", "score_candidates", kFCategory, t1, 2500);
      }
      return GetProducts(s, t1);
    });
  }

  uint64_t GetCart(uint32_t parent, uint64_t t) {
    return Rpc(parent, kCart, kGetCart, kFQty, t, [&](uint32_t s, uint64_t t1) {
      RedisKey("HGETALL", "cart:user-", ctx.user, 6);
      return Db(s, kCartRedis, "HGETALL", "HGETALL", "", "GetCartAsync", t1);
    });
  }

  // ---- flows: the frontend's work for each route, under its SERVER span ----

  uint64_t RunFlow(Flow flow, uint32_t fe, uint64_t t) {
    switch (flow) {
      case Flow::kHome:
        t = Rpc(fe, kCatalog, kListProducts, kFCategory, t, [&](uint32_t s, uint64_t t1) {
          RedisKey("GET", "listing:home:", ctx.category, 2);
          t1 = Db(s, kCacheRedis, "GET", "GET", "", "getCachedListing", t1);
          if (rng.Chance(0.2)) {
            Stmt(
                "SELECT id, sku, name, price_cents FROM products WHERE featured ORDER BY rank "
                "LIMIT 24");
            t1 = Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findFeatured",
                    t1);
          }
          return t1;
        });
        t = Recommendations(fe, t);
        return Internal(fe, "render home", "renderHome", 0, t, 1500);
      case Flow::kProduct: {
        bool found = true;
        t = Rpc(fe, kCatalog, kGetProduct, kFSku, t, [&](uint32_t s, uint64_t t1) {
          t1 = CachedProduct(s, t1, 0.15);
          if (rng.Chance(0.02)) {
            found = false;
            SetAttr(s, "rpc.grpc.status_code", ValueType::kInt, "5");
            SetAttr(static_cast<uint32_t>(spans[s].parent), "rpc.grpc.status_code", ValueType::kInt,
                    "5");
          }
          return t1;
        });
        if (!found) {
          SetAttr(fe, "http.response.status_code", ValueType::kInt, "404");
          SetAttr(ctx.first, "http.response.status_code", ValueType::kInt, "404");
          return t;
        }
        if (Room(3)) {
          t = Rpc(fe, kInventory, kGetStock, kFSku, t, [&](uint32_t s, uint64_t t1) {
            Stmt("SELECT sum(available) FROM stock WHERE sku = $1");
            return Db(s, kInventoryDb, "SELECT inventory.stock", "SELECT", "stock", "getStock", t1);
          });
        }
        if (rng.Chance(0.7)) t = Recommendations(fe, t);
        if (Room(1)) t = Internal(fe, "render product page", "renderProduct", kFSku, t, 1200);
        return t;
      }
      case Flow::kBrowse:
        t = Rpc(fe, kCatalog, kListProducts, kFCategory, t, [&](uint32_t s, uint64_t t1) {
          Stmt(
              "SELECT p.id, p.sku, p.name, p.price_cents FROM products p JOIN categories c ON "
              "c.id = p.category_id WHERE c.slug = $1 ORDER BY p.rank LIMIT $2 OFFSET $3");
          return Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products",
                    "findByCategory", t1);
        });
        return Internal(fe, "render listing", "renderListing", kFCategory, t, 1400);
      case Flow::kSearch:
        t = Rpc(fe, kSearch, kSearchMethod, kFQuery, t, [&](uint32_t s, uint64_t t1) {
          stmt.assign("{\"find\":\"products\",\"filter\":{\"$text\":{\"$search\":\"?\"}},");
          stmt += "\"limit\":48}";
          t1 = Db(s, kSearchMongo, "find search.products", "find", "products", "search", t1);
          return Internal(s, "rank results", "rankResults", kFQuery, t1, 3000);
        });
        return GetProducts(fe, t);
      case Flow::kSuggest:
        return Rpc(fe, kSearch, kSuggest, kFQuery, t, [&](uint32_t s, uint64_t t1) {
          Stmt("ZRANGEBYLEX suggest:prefix [? [?\xff LIMIT 0 10");
          return Db(s, kCacheRedis, "ZRANGEBYLEX", "ZRANGEBYLEX", "", "suggest", t1);
        });
      case Flow::kCartView: {
        t = GetCart(fe, t);
        const int items = ctx.cart_items < 4 ? ctx.cart_items : 4;
        for (int i = 0; i < items && Room(3); ++i) {
          t = Rpc(fe, kCatalog, kGetProduct, kFSku, t,
                  [&](uint32_t s, uint64_t t1) { return CachedProduct(s, t1, 0.05); });
        }
        return t;
      }
      case Flow::kCartAdd:
        t = Rpc(fe, kInventory, kGetStock, kFSku | kFQty, t, [&](uint32_t s, uint64_t t1) {
          Stmt("SELECT available FROM stock WHERE sku = $1 AND warehouse_id = ANY($2)");
          return Db(s, kInventoryDb, "SELECT inventory.stock", "SELECT", "stock", "getStock", t1);
        });
        return Rpc(fe, kCart, kAddItem, kFSku | kFQty | kFPrice, t, [&](uint32_t s, uint64_t t1) {
          RedisKey("HSET", "cart:user-", ctx.user, 6);
          stmt += " SKU-? ?";
          t1 = Db(s, kCartRedis, "HSET", "HSET", "", "AddItemAsync", t1);
          RedisKey("EXPIRE", "cart:user-", ctx.user, 6);
          stmt += " 604800";
          return Db(s, kCartRedis, "EXPIRE", "EXPIRE", "", "AddItemAsync", t1);
        });
      case Flow::kCartRemove:
        return Rpc(fe, kCart, kRemoveItem, kFSku, t, [&](uint32_t s, uint64_t t1) {
          RedisKey("HDEL", "cart:user-", ctx.user, 6);
          stmt += " SKU-?";
          return Db(s, kCartRedis, "HDEL", "HDEL", "", "RemoveItemAsync", t1);
        });
      case Flow::kCheckout:
        return Rpc(
            fe, kCheckout, kPlaceOrder, kFOrder | kFQty | kFPrice | kFFlag, t,
            [&](uint32_t s, uint64_t t1) {
              t1 = GetCart(s, t1);
              const int items = ctx.cart_items < 3 ? ctx.cart_items : 3;
              for (int i = 0; i < items && Room(12); ++i) {
                t1 =
                    Rpc(s, kInventory, kReserve, kFSku | kFOrder, t1, [&](uint32_t r, uint64_t t2) {
                      Stmt(
                          "UPDATE stock SET available = available - $1, reserved = "
                          "reserved + $1 WHERE sku = $2 AND available >= $1");
                      return Db(r, kInventoryDb, "UPDATE inventory.stock", "UPDATE", "stock",
                                "reserve", t2);
                    });
              }
              if (Room(4)) {
                t1 = Rpc(s, kPayment, kCharge, kFOrder | kFPrice, t1, [&](uint32_t p, uint64_t t2) {
                  t2 = Internal(p, "fraud check", "fraudCheck", kFPrice, t2, 4000);
                  return External(p, "POST", "api.payments.example.com", "/v1/payment_intents", 200,
                                  t2, 90000);
                });
              }
              if (Room(3)) t1 = Leaf(s, kShipping, kGetQuote, kFOrder, t1, 600);
              if (Room(1)) {
                Stmt(
                    "INSERT INTO orders (id, user_id, total_cents, currency, status, created_at) "
                    "VALUES ($1, $2, $3, $4, 'placed', now())");
                t1 =
                    Db(s, kOrdersDb, "INSERT orders.orders", "INSERT", "orders", "insertOrder", t1);
              }
              if (Room(5)) {
                t1 = Kafka(s, kEmail, t1, [&](uint32_t c, uint64_t t2) {
                  t2 = Internal(c, "render confirmation", "render", kFOrder, t2, 6000);
                  return External(c, "POST", "api.mail.example.com", "/v3/mail/send", 202, t2,
                                  40000);
                });
              }
              if (Room(3)) {
                t1 = Rpc(s, kCart, kEmptyCart, 0, t1, [&](uint32_t e, uint64_t t2) {
                  RedisKey("DEL", "cart:user-", ctx.user, 6);
                  return Db(e, kCartRedis, "DEL", "DEL", "", "EmptyCartAsync", t2);
                });
              }
              return t1;
            });
      case Flow::kOrderStatus:
        t = Rpc(fe, kCheckout, kGetOrder, kFOrder, t, [&](uint32_t s, uint64_t t1) {
          Stmt(
              "SELECT o.id, o.status, o.total_cents, i.sku, i.qty FROM orders o JOIN order_items "
              "i ON i.order_id = o.id WHERE o.id = $1 AND o.user_id = $2");
          return Db(s, kOrdersDb, "SELECT orders.orders", "SELECT", "orders", "getOrder", t1);
        });
        if (rng.Chance(0.5)) t = Leaf(fe, kShipping, kTrackOrder, kFOrder, t, 800);
        return t;
      case Flow::kOrderList:
        return Rpc(fe, kCheckout, kListOrders, 0, t, [&](uint32_t s, uint64_t t1) {
          Stmt(
              "SELECT id, status, total_cents, created_at FROM orders WHERE user_id = $1 ORDER BY "
              "created_at DESC LIMIT 20");
          return Db(s, kOrdersDb, "SELECT orders.orders", "SELECT", "orders", "listOrders", t1);
        });
      case Flow::kOrderCancel:
        return Rpc(fe, kCheckout, kCancelOrder, kFOrder, t, [&](uint32_t s, uint64_t t1) {
          Stmt("UPDATE orders SET status = 'cancelled' WHERE id = $1 AND status = 'placed'");
          t1 = Db(s, kOrdersDb, "UPDATE orders.orders", "UPDATE", "orders", "cancelOrder", t1);
          return Kafka(s, kInventory, t1, [&](uint32_t c, uint64_t t2) {
            Stmt(
                "UPDATE stock SET available = available + r.qty FROM reservations r WHERE "
                "r.order_id = $1");
            return Db(c, kInventoryDb, "UPDATE inventory.stock", "UPDATE", "stock", "release", t2);
          });
        });
      case Flow::kLogin:
        return Rpc(fe, kUser, kLogin, 0, t, [&](uint32_t s, uint64_t t1) {
          Stmt("SELECT id, password_hash, status FROM users WHERE email = $1");
          t1 = Db(s, kUsersDb, "SELECT users.users", "SELECT", "users", "find_by_email", t1);
          t1 = Internal(s, "verify password", "verify_password", 0, t1, 60000);
          stmt.assign("SETEX session:");
          AppendHex(stmt, ctx.session[0], 16);
          AppendHex(stmt, ctx.session[1], 16);
          stmt += " 86400 ?";
          return Db(s, kCacheRedis, "SETEX", "SETEX", "", "create_session", t1);
        });
      case Flow::kProfile:
        return Rpc(fe, kUser, kGetUser, 0, t, [&](uint32_t s, uint64_t t1) {
          RedisKey("GET", "user:user-", ctx.user, 6);
          t1 = Db(s, kCacheRedis, "GET", "GET", "", "get_cached_user", t1);
          if (rng.Chance(0.3)) {
            Stmt("SELECT id, email, name, created_at, tier FROM users WHERE id = $1");
            t1 = Db(s, kUsersDb, "SELECT users.users", "SELECT", "users", "get_user", t1);
          }
          return t1;
        });
      case Flow::kRecs:
        return Recommendations(fe, t);
      case Flow::kShipQuote:
        return Rpc(fe, kShipping, kGetQuote, kFQty, t, [&](uint32_t s, uint64_t t1) {
          Stmt("GET rates:zone:?");
          t1 = Db(s, kCacheRedis, "GET", "GET", "", "cached_rates", t1);
          return Internal(s, "compute rates", "compute_rates", kFQty, t1, 900);
        });
      case Flow::kReview:
        return Rpc(fe, kCatalog, kAddReview, kFSku, t, [&](uint32_t s, uint64_t t1) {
          t1 = Internal(s, "moderate review", "moderate", kFSku, t1, 8000);
          Stmt(
              "{\"insert\":\"reviews\",\"documents\":[{\"sku\":\"?\",\"rating\":\"?\","
              "\"text\":\"?\"}]}");
          return Db(s, kReviewsMongo, "insert reviews.reviews", "insert", "reviews", "addReview",
                    t1);
        });
    }
    return t;
  }

  void HttpServerAttrs(uint32_t i, bool gateway) {
    const Route& r = *ctx.route;
    AStr("http.request.method", r.base->method);
    AStr("http.route", r.route);
    {
      const uint32_t b = Mark();
      std::string_view tmpl = r.route;
      for (size_t p = 0; p < tmpl.size();) {
        if (tmpl[p] != '{') {
          text += tmpl[p++];
          continue;
        }
        const size_t close = tmpl.find('}', p);
        const std::string_view var = tmpl.substr(p + 1, close - p - 1);
        if (var == "sku") {
          text += "SKU-";
          AppendPadded(text, ctx.sku, 5);
        } else if (var == "order_id") {
          codec::AppendInt(text, ctx.order_id);
        } else {
          text += kCategories[ctx.category];
        }
        p = close + 1;
      }
      Push("url.path", ValueType::kString, b);
    }
    if (r.base->flow == Flow::kSearch || r.base->flow == Flow::kSuggest) {
      const uint32_t b = Mark();
      text += "q=";
      const uint32_t words = Mark();
      AQuery("tmp");
      target->pop_back();
      for (uint32_t k = words; k < text.size(); ++k) {
        if (text[k] == ' ') text[k] = '+';
      }
      Push("url.query", ValueType::kString, b);
    }
    AStr("url.scheme", gateway ? "https" : "http");
    AStr("server.address", gateway ? "shop.example.com" : "frontend");
    AInt("server.port", gateway ? 443 : 8080);
    AStr("network.protocol.version", gateway ? "2" : "1.1");
    if (gateway) {
      AIp("network.peer.address", (10u << 24) | (rng.Below(4) << 8) | (1 + rng.Below(254)));
    } else {
      AStr("network.peer.address", PodOf(kGateway).ip);
    }
    AInt("network.peer.port", 32768 + rng.Below(28000));
    AIp("client.address", ctx.client_ip);
    AStr("user_agent.original", kUserAgents[ctx.ua]);
    AInt("http.response.status_code", r.base->ok_status);
    AInt("http.response.body.size", static_cast<int64_t>(rng.LogNormal(4000, 1.0)));
    if (std::string_view(r.base->method) != "GET") {
      AInt("http.request.body.size", static_cast<int64_t>(rng.LogNormal(300, 0.6)));
    }
  }

  // Builds one trace into the scratch records; returns its span count.
  uint32_t BuildTrace(uint64_t start) {
    ctx.trace_id = NewTraceId();
    ctx.first = static_cast<uint32_t>(spans.size());
    // Users: 200k ids, the low ones more active.
    ctx.user = static_cast<uint32_t>(200000.0 * std::pow(rng.Uniform(), 1.5));
    ctx.session[0] = rng.Next();
    ctx.session[1] = rng.Next();
    ctx.request[0] = rng.Next();
    ctx.request[1] = rng.Next();
    ctx.client_ip = static_cast<uint32_t>(rng.Next() >> 32);
    ctx.ua = rng.Below(std::size(kUserAgents));
    ctx.region = rng.Below(std::size(kRegions));
    ctx.bucket = rng.Below(std::size(kBuckets));
    ctx.store = 1 + rng.Below(500);
    // Skus: 20k, popular ones much more often.
    ctx.sku = static_cast<uint32_t>(20000.0 * rng.Uniform() * rng.Uniform());
    ctx.category = rng.Below(std::size(kCategories));
    ctx.order_id = static_cast<int64_t>(rng.Next() >> 1);
    ctx.cart_items = 1 + static_cast<int>(rng.Below(8));
    ctx.price = static_cast<double>(static_cast<int64_t>(rng.LogNormal(4500, 1.0))) / 100.0 + 0.99;
    ctx.flag = rng.Chance(0.3);
    ctx.pod.fill(-1);
    ctx.route = &PickRoute();
    const Route& r = *ctx.route;

    const uint32_t root = Open(kGateway, SpanKind::kServer, r.name, -1, start);
    HttpServerAttrs(root, true);
    Seal(root, kFFlag);
    uint64_t t = start + Dur(40);
    const uint32_t gc =
        Open(kGateway, SpanKind::kClient, r.base->method, static_cast<int32_t>(root), t);
    AStr("http.request.method", r.base->method);
    {
      const uint32_t b = Mark();
      text += "http://frontend:8080";
      text += r.route;
      Push("url.full", ValueType::kString, b);
    }
    AStr("server.address", "frontend");
    AInt("server.port", 8080);
    AStr("network.peer.address", PodOf(kFrontend).ip);
    AInt("network.peer.port", 8080);
    AStr("network.protocol.version", "1.1");
    AInt("http.response.status_code", r.base->ok_status);
    Seal(gc, 0);
    t += Net();
    const uint32_t fe = Open(kFrontend, SpanKind::kServer, r.name, static_cast<int32_t>(gc), t);
    HttpServerAttrs(fe, false);
    Seal(fe, FlowFields(r.base->flow));
    // Some GETs are answered from the frontend's page cache: the smallest
    // traces (3-4 spans).
    const bool cached = std::string_view(r.base->method) == "GET" && rng.Chance(0.06);
    if (cached) {
      t += Dur(80);
      if (rng.Chance(0.5)) t = Internal(fe, "render from page cache", "renderCached", 0, t, 300);
    } else {
      t = RunFlow(r.base->flow, fe, t + Dur(60));
    }
    t += Dur(120);
    Close(fe, t);
    // The gateway client's status follows the frontend's (a 404 above).
    for (uint32_t a = spans[fe].attr_begin; a < spans[fe].attr_end; ++a) {
      if (attrs[a].key == "http.response.status_code") {
        // Copied out first: SetAttr appends to `text`, which may move.
        char code[8];
        const uint32_t n = attrs[a].len < sizeof(code) ? attrs[a].len : sizeof(code);
        std::memcpy(code, text.data() + attrs[a].off, n);
        SetAttr(gc, "http.response.status_code", ValueType::kInt, std::string_view(code, n));
        break;
      }
    }
    t += Net();
    Close(gc, t);
    Close(root, t + Dur(30));
    if (rng.Chance(0.01)) InjectError();
    return Count();
  }

  static uint32_t FlowFields(Flow f) {
    switch (f) {
      case Flow::kProduct:
      case Flow::kCartRemove:
      case Flow::kReview:
        return kFSku;
      case Flow::kCartAdd:
        return kFSku | kFQty | kFPrice;
      case Flow::kCheckout:
        return kFOrder | kFQty | kFPrice | kFFlag;
      case Flow::kOrderStatus:
      case Flow::kOrderCancel:
        return kFOrder;
      case Flow::kSearch:
      case Flow::kSuggest:
        return kFQuery;
      case Flow::kBrowse:
      case Flow::kHome:
        return kFCategory;
      case Flow::kCartView:
      case Flow::kShipQuote:
        return kFQty;
      default:
        return 0;
    }
  }

  // Fails one leaf span of the trace just built and carries the failure up
  // to the root, stopping at an async (kafka consumer) boundary.
  void InjectError() {
    const uint32_t n = static_cast<uint32_t>(spans.size());
    uint32_t leaves = 0;
    for (uint32_t i = ctx.first + 1; i < n; ++i) leaves += spans[i].has_child ? 0 : 1;
    if (leaves == 0) return;
    uint32_t pick = rng.Below(leaves);
    uint32_t f = ctx.first;
    for (uint32_t i = ctx.first + 1; i < n; ++i) {
      if (spans[i].has_child) continue;
      if (pick-- == 0) {
        f = i;
        break;
      }
    }
    SpanRec& s = spans[f];
    const Svc svc = static_cast<Svc>(s.svc);
    std::string_view system;
    for (uint32_t a = s.attr_begin; a < s.attr_end; ++a) {
      if (attrs[a].key == "db.system") {
        system = std::string_view(text).substr(attrs[a].off, attrs[a].len);
      }
    }
    const Failure& fail =
        system.starts_with("redis") ? kRedisFailures[rng.Below(std::size(kRedisFailures))]
        : !system.empty()           ? kDbFailures[rng.Below(std::size(kDbFailures))]
                                    : kInternalFailures[rng.Below(std::size(kInternalFailures))];
    s.status = StatusCodeOtlp::kError;
    s.status_message = fail.status;
    SetAttr(f, "http.response.status_code", ValueType::kInt, "503");
    SetAttr(f, "rpc.grpc.status_code", ValueType::kInt, "14");

    // The exception event: moved to the end of `events` with the span's others.
    const uint32_t first_event = static_cast<uint32_t>(events.size());
    for (uint32_t e = s.event_begin; e < s.event_end; ++e) {
      const EventRec copy = events[e];
      events.push_back(copy);
    }
    EventRec ev{};
    ev.time = s.end - (s.end - s.start) / 10;
    ev.name = "exception";
    target = &event_attrs;
    ev.attr_begin = static_cast<uint32_t>(event_attrs.size());
    AStr("exception.type", fail.type);
    AStr("exception.message", fail.status);
    {
      const uint32_t b = Mark();
      text += fail.type;
      text += ": ";
      text += fail.status;
      for (int k = 0; k < 6; ++k) {
        text += "\n\tat ";
        text += kServices[svc].code_namespace;
        text += k == 0 ? ".execute" : k < 3 ? ".handle" : ".invoke";
        text += '(';
        text += kServices[svc].name;
        text += ".src:";
        codec::AppendInt(text, 10 + rng.Below(900));
        text += ')';
      }
      Push("exception.stacktrace", ValueType::kString, b);
    }
    ABool("exception.escaped", true);
    ev.attr_end = static_cast<uint32_t>(event_attrs.size());
    target = &attrs;
    events.push_back(ev);
    s.event_begin = first_event;
    s.event_end = static_cast<uint32_t>(events.size());

    uint32_t cur = f;
    while (spans[cur].kind != SpanKind::kConsumer && spans[cur].parent >= 0) {
      cur = static_cast<uint32_t>(spans[cur].parent);
      SpanRec& p = spans[cur];
      p.status = StatusCodeOtlp::kError;
      SetAttr(cur, "http.response.status_code", ValueType::kInt, "500");
      SetAttr(cur, "rpc.grpc.status_code", ValueType::kInt, "13");
      if (p.kind == SpanKind::kClient && p.svc != kGateway) p.status_message = "INTERNAL";
    }
  }

  void ClearScratch() {
    spans.clear();
    attrs.clear();
    event_attrs.clear();
    events.clear();
    links.clear();
    text.clear();
  }

  // ---- output ----

  static void CopyAttrs(SpanBatch* out, AttrColumns& cols, const std::vector<AttrRec>& recs,
                        uint32_t begin, uint32_t end, std::string_view text) {
    for (uint32_t a = begin; a < end; ++a) {
      const AttrRec& r = recs[a];
      SpanBatch::AddAttr(cols, out->AddString(r.key), r.type,
                         out->AddString(text.substr(r.off, r.len)));
    }
  }

  void AddResourceAttr(SpanBatch* out, std::string_view key, ValueType type,
                       std::string_view value) {
    SpanBatch::AddAttr(out->resource_attrs, out->AddString(key), type, out->AddString(value));
  }

  // Writes the scratch spans to `out` grouped by (service, pod).
  size_t Emit(SpanBatch* out) {
    groups.clear();
    span_group.resize(spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
      const uint32_t key = static_cast<uint32_t>(spans[i].svc) << 16 | spans[i].pod;
      uint32_t g = 0;
      while (g < groups.size() && groups[g] != key) ++g;
      if (g == groups.size()) groups.push_back(key);
      span_group[i] = g;
    }
    const std::string_view txt = text;
    for (uint32_t g = 0; g < groups.size(); ++g) {
      const ServiceDef& sd = kServices[groups[g] >> 16];
      const Pod& pod = pods[groups[g] >> 16][groups[g] & 0xffff];
      const uint32_t r = out->AddResource();
      AddResourceAttr(out, "service.name", ValueType::kString, sd.name);
      AddResourceAttr(out, "service.version", ValueType::kString, sd.version);
      AddResourceAttr(out, "service.namespace", ValueType::kString, "shop");
      AddResourceAttr(out, "service.instance.id", ValueType::kString, pod.uid);
      AddResourceAttr(out, "deployment.environment", ValueType::kString, "production");
      AddResourceAttr(out, "host.name", ValueType::kString, pod.node);
      AddResourceAttr(out, "k8s.namespace.name", ValueType::kString, "shop");
      AddResourceAttr(out, "k8s.deployment.name", ValueType::kString, sd.name);
      AddResourceAttr(out, "k8s.pod.name", ValueType::kString, pod.name);
      AddResourceAttr(out, "k8s.node.name", ValueType::kString, pod.node);
      AddResourceAttr(out, "telemetry.sdk.name", ValueType::kString, "opentelemetry");
      AddResourceAttr(out, "telemetry.sdk.language", ValueType::kString, sd.language);
      AddResourceAttr(out, "telemetry.sdk.version", ValueType::kString, sd.sdk_version);
      if (!run_id.empty()) AddResourceAttr(out, "loadgen.run_id", ValueType::kString, run_id);
      out->resources.attrs[r].end = static_cast<uint32_t>(out->resource_attrs.size());
      out->resources.schema_url[r] = out->AddString("https://opentelemetry.io/schemas/1.24.0");
      out->ResolveServiceName(r);
      const uint32_t sc = out->AddScope();
      out->scopes.name[sc] = out->AddString(sd.scope);
      out->scopes.version[sc] = out->AddString(sd.scope_version);

      for (size_t i = 0; i < spans.size(); ++i) {
        if (span_group[i] != g) continue;
        const SpanRec& s = spans[i];
        const uint32_t sp = out->AddSpan(r, sc);
        SpanBatch::Spans& o = out->spans;
        o.trace_id[sp] = s.trace_id;
        o.span_id[sp] = s.id;
        o.parent_span_id[sp] = s.parent_id;
        o.flags[sp] = 0x101;  // sampled; has_is_remote known (false)
        o.name[sp] = out->AddString(s.name);
        o.kind[sp] = static_cast<uint8_t>(s.kind);
        o.start_ns[sp] = s.start;
        o.end_ns[sp] = s.end;
        o.status_code[sp] = static_cast<uint8_t>(s.status);
        if (!s.status_message.empty()) o.status_message[sp] = out->AddString(s.status_message);
        CopyAttrs(out, out->span_attrs, attrs, s.attr_begin, s.attr_end, txt);
        o.attrs[sp].end = static_cast<uint32_t>(out->span_attrs.size());
        for (uint32_t e = s.event_begin; e < s.event_end; ++e) {
          const EventRec& er = events[e];
          const uint32_t ei = out->AddEvent();
          out->events.time_ns[ei] = er.time;
          out->events.name[ei] = out->AddString(er.name);
          CopyAttrs(out, out->event_attrs, event_attrs, er.attr_begin, er.attr_end, txt);
          out->events.attrs[ei].end = static_cast<uint32_t>(out->event_attrs.size());
        }
        o.events[sp].end = static_cast<uint32_t>(out->events.time_ns.size());
        for (uint32_t l = s.link_begin; l < s.link_end; ++l) {
          const uint32_t li = out->AddLink();
          out->links.trace_id[li] = links[l].trace_id;
          out->links.span_id[li] = links[l].span_id;
          out->links.flags[li] = 0x101;
        }
        o.links[sp].end = static_cast<uint32_t>(out->links.trace_id.size());
      }
    }
    return spans.size();
  }
};

TraceGenerator::TraceGenerator(CorpusOptions options)
    : impl_(std::make_unique<Impl>(options.seed)) {}

TraceGenerator::~TraceGenerator() = default;

size_t TraceGenerator::AppendTrace(uint64_t start_ns, SpanBatch* out) {
  Impl& m = *impl_;
  m.ClearScratch();
  for (auto& pool : m.pod_pool) pool.clear();
  m.BuildTrace(start_ns);
  return m.Emit(out);
}

size_t TraceGenerator::AppendTraces(uint64_t start_ns, uint64_t spacing_ns, size_t min_spans,
                                    SpanBatch* out) {
  Impl& m = *impl_;
  m.ClearScratch();
  for (int s = 0; s < kServiceCount; ++s) {
    auto& pool = m.pod_pool[s];
    pool.clear();
    const int n = kServices[s].pods;
    const int k = n < 3 ? n : 3;
    while (static_cast<int>(pool.size()) < k) {
      const auto p = static_cast<uint16_t>(m.rng.Below(static_cast<uint32_t>(n)));
      bool dup = false;
      for (uint16_t q : pool) dup = dup || q == p;
      if (!dup) pool.push_back(p);
    }
  }
  uint64_t t = start_ns;
  do {
    m.BuildTrace(t);
    t += spacing_ns;
  } while (m.spans.size() < min_spans);
  return m.Emit(out);
}

void TraceGenerator::SetRunId(std::string_view run_id) {
  impl_->run_id.assign(run_id);
}

}  // namespace spanhouse::loadgen
