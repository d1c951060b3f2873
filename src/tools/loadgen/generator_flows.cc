// The flows: the frontend's work for each route, under its SERVER span, and
// the gRPC methods and databases they call.
#include "tools/loadgen/generator_builder.h"

namespace spanhouse::loadgen::corpus {
namespace {

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

}  // namespace

// ---- calls more than one flow makes ----

// Catalog's cached product lookup: redis, and postgres on a miss.
uint64_t TraceBuilder::CachedProduct(uint32_t s, uint64_t t, double miss) {
  RedisKey("GET", "product:SKU-", ctx.sku, 5);
  t = Db(s, kCacheRedis, "GET", "GET", "", "getCachedProduct", t);
  if (rng.Chance(miss) && Room(2)) {
    Stmt(
        "SELECT id, sku, name, description, price_cents, currency, category_id FROM products "
        "WHERE sku = $1");
    Bind({LitSku(ctx.sku, true)});
    t = Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findBySku", t);
    RedisKey("SETEX", "product:SKU-", ctx.sku, 5);
    stmt += " 300 ?";
    Bind({"{\"sku\":\"" + LitSku(ctx.sku, false) +
          "\",\"price_cents\":" + LitInt(static_cast<int64_t>(ctx.price * 100)) + "}"});
    t = Db(s, kCacheRedis, "SETEX", "SETEX", "", "cacheProduct", t);
  }
  return t;
}

uint64_t TraceBuilder::GetProducts(uint32_t parent, uint64_t t) {
  if (!Room(3)) return t;
  return Rpc(parent, kCatalog, kGetProducts, kFSku, t, [&](uint32_t s, uint64_t t1) {
    stmt.assign("MGET product:SKU-");
    AppendPadded(stmt, ctx.sku, 5);
    stmt += " ?";
    Bind({"product:" + LitSku(ctx.other_sku, false)});
    t1 = Db(s, kCacheRedis, "MGET", "MGET", "", "getCachedProducts", t1);
    if (rng.Chance(0.2) && Room(1)) {
      Stmt("SELECT id, sku, name, price_cents FROM products WHERE sku = ANY($1)");
      Bind({"ARRAY[" + LitSku(ctx.sku, true) + "," + LitSku(ctx.other_sku, true) + "]"});
      t1 = Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findAllBySku", t1);
    }
    return t1;
  });
}

uint64_t TraceBuilder::Recommendations(uint32_t parent, uint64_t t) {
  if (!Room(3)) return t;
  return Rpc(parent, kRecommendation, kListRecs, kFSku | kFFlag, t, [&](uint32_t s, uint64_t t1) {
    if (Room(1)) {
      t1 = Internal(s, "score candidates", "score_candidates", kFCategory, t1, 2500);
    }
    return GetProducts(s, t1);
  });
}

uint64_t TraceBuilder::GetCart(uint32_t parent, uint64_t t) {
  return Rpc(parent, kCart, kGetCart, kFQty, t, [&](uint32_t s, uint64_t t1) {
    RedisKey("HGETALL", "cart:user-", ctx.user, 6);
    return Db(s, kCartRedis, "HGETALL", "HGETALL", "", "GetCartAsync", t1);
  });
}

// ---- the flows ----

uint64_t TraceBuilder::RunFlow(Flow flow, uint32_t fe, uint64_t t) {
  switch (flow) {
    case Flow::kHome:
      return Home(fe, t);
    case Flow::kProduct:
      return Product(fe, t);
    case Flow::kBrowse:
      return Browse(fe, t);
    case Flow::kSearch:
      return Search(fe, t);
    case Flow::kSuggest:
      return Suggest(fe, t);
    case Flow::kCartView:
      return CartView(fe, t);
    case Flow::kCartAdd:
      return CartAdd(fe, t);
    case Flow::kCartRemove:
      return CartRemove(fe, t);
    case Flow::kCheckout:
      return Checkout(fe, t);
    case Flow::kOrderStatus:
      return OrderStatus(fe, t);
    case Flow::kOrderList:
      return OrderList(fe, t);
    case Flow::kOrderCancel:
      return OrderCancel(fe, t);
    case Flow::kLogin:
      return Login(fe, t);
    case Flow::kProfile:
      return Profile(fe, t);
    case Flow::kRecs:
      return Recommendations(fe, t);
    case Flow::kShipQuote:
      return ShipQuote(fe, t);
    case Flow::kReview:
      return Review(fe, t);
  }
  return t;
}

uint32_t TraceBuilder::FlowFields(Flow f) {
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

uint64_t TraceBuilder::Home(uint32_t fe, uint64_t t) {
  t = Rpc(fe, kCatalog, kListProducts, kFCategory, t, [&](uint32_t s, uint64_t t1) {
    RedisKey("GET", "listing:home:", ctx.category, 2);
    t1 = Db(s, kCacheRedis, "GET", "GET", "", "getCachedListing", t1);
    if (rng.Chance(0.2)) {
      Stmt(
          "SELECT id, sku, name, price_cents FROM products WHERE featured ORDER BY rank "
          "LIMIT 24");
      t1 = Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findFeatured", t1);
    }
    return t1;
  });
  t = Recommendations(fe, t);
  return Internal(fe, "render home", "renderHome", 0, t, 1500);
}

uint64_t TraceBuilder::Product(uint32_t fe, uint64_t t) {
  bool found = true;
  t = Rpc(fe, kCatalog, kGetProduct, kFSku, t, [&](uint32_t s, uint64_t t1) {
    t1 = CachedProduct(s, t1, 0.15);
    if (rng.Chance(0.02)) {
      found = false;
      SetAttr(s, "rpc.grpc.status_code", ValueType::kInt, "5");
      SetAttr(static_cast<uint32_t>(spans[s].parent), "rpc.grpc.status_code", ValueType::kInt, "5");
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
      Bind({LitSku(ctx.sku, true)});
      return Db(s, kInventoryDb, "SELECT inventory.stock", "SELECT", "stock", "getStock", t1);
    });
  }
  if (rng.Chance(0.7)) t = Recommendations(fe, t);
  if (Room(1)) t = Internal(fe, "render product page", "renderProduct", kFSku, t, 1200);
  return t;
}

uint64_t TraceBuilder::Browse(uint32_t fe, uint64_t t) {
  t = Rpc(fe, kCatalog, kListProducts, kFCategory, t, [&](uint32_t s, uint64_t t1) {
    Stmt(
        "SELECT p.id, p.sku, p.name, p.price_cents FROM products p JOIN categories c ON "
        "c.id = p.category_id WHERE c.slug = $1 ORDER BY p.rank LIMIT $2 OFFSET $3");
    Bind({LitText(kCategories[ctx.category]), "24", LitInt((ctx.page - 1) * 24)});
    return Db(s, kCatalogDb, "SELECT catalog.products", "SELECT", "products", "findByCategory", t1);
  });
  return Internal(fe, "render listing", "renderListing", kFCategory, t, 1400);
}

uint64_t TraceBuilder::Search(uint32_t fe, uint64_t t) {
  t = Rpc(fe, kSearch, kSearchMethod, kFQuery, t, [&](uint32_t s, uint64_t t1) {
    stmt.assign("{\"find\":\"products\",\"filter\":{\"$text\":{\"$search\":\"?\"}},");
    stmt += "\"limit\":48}";
    Bind({Words(' ')});
    t1 = Db(s, kSearchMongo, "find search.products", "find", "products", "search", t1);
    return Internal(s, "rank results", "rankResults", kFQuery, t1, 3000);
  });
  return GetProducts(fe, t);
}

uint64_t TraceBuilder::Suggest(uint32_t fe, uint64_t t) {
  return Rpc(fe, kSearch, kSuggest, kFQuery, t, [&](uint32_t s, uint64_t t1) {
    // The fresh corpus's values are valid UTF-8: U+00FF for the byte 0xff.
    Stmt("ZRANGEBYLEX suggest:prefix [? [?\xff LIMIT 0 10",
         "ZRANGEBYLEX suggest:prefix [? [?\xc3\xbf LIMIT 0 10");
    const std::string words = Words(' ');
    Bind({words, words});
    return Db(s, kCacheRedis, "ZRANGEBYLEX", "ZRANGEBYLEX", "", "suggest", t1);
  });
}

uint64_t TraceBuilder::CartView(uint32_t fe, uint64_t t) {
  t = GetCart(fe, t);
  const int items = ctx.cart_items < 4 ? ctx.cart_items : 4;
  for (int i = 0; i < items && Room(3); ++i) {
    t = Rpc(fe, kCatalog, kGetProduct, kFSku, t,
            [&](uint32_t s, uint64_t t1) { return CachedProduct(s, t1, 0.05); });
  }
  return t;
}

uint64_t TraceBuilder::CartAdd(uint32_t fe, uint64_t t) {
  t = Rpc(fe, kInventory, kGetStock, kFSku | kFQty, t, [&](uint32_t s, uint64_t t1) {
    Stmt("SELECT available FROM stock WHERE sku = $1 AND warehouse_id = ANY($2)");
    Bind({LitSku(ctx.sku, true), "ARRAY[" + LitInt(1 + fresh_rng.Below(40)) + "," +
                                     LitInt(41 + fresh_rng.Below(40)) + "]"});
    return Db(s, kInventoryDb, "SELECT inventory.stock", "SELECT", "stock", "getStock", t1);
  });
  return Rpc(fe, kCart, kAddItem, kFSku | kFQty | kFPrice, t, [&](uint32_t s, uint64_t t1) {
    RedisKey("HSET", "cart:user-", ctx.user, 6);
    stmt += " SKU-? ?";
    Bind({LitPadded(ctx.sku, 5), LitInt(ctx.cart_items)});
    t1 = Db(s, kCartRedis, "HSET", "HSET", "", "AddItemAsync", t1);
    RedisKey("EXPIRE", "cart:user-", ctx.user, 6);
    stmt += " 604800";
    return Db(s, kCartRedis, "EXPIRE", "EXPIRE", "", "AddItemAsync", t1);
  });
}

uint64_t TraceBuilder::CartRemove(uint32_t fe, uint64_t t) {
  return Rpc(fe, kCart, kRemoveItem, kFSku, t, [&](uint32_t s, uint64_t t1) {
    RedisKey("HDEL", "cart:user-", ctx.user, 6);
    stmt += " SKU-?";
    Bind({LitPadded(ctx.sku, 5)});
    return Db(s, kCartRedis, "HDEL", "HDEL", "", "RemoveItemAsync", t1);
  });
}

uint64_t TraceBuilder::Checkout(uint32_t fe, uint64_t t) {
  return Rpc(fe, kCheckout, kPlaceOrder, kFOrder | kFQty | kFPrice | kFFlag, t,
             [&](uint32_t s, uint64_t t1) { return PlaceOrder(s, t1); });
}

// Checkout's server span: the cart, a reservation per item, the payment, the
// shipping quote, the order row, the confirmation mail by kafka, the cart
// emptied.
uint64_t TraceBuilder::PlaceOrder(uint32_t s, uint64_t t1) {
  t1 = GetCart(s, t1);
  const int items = ctx.cart_items < 3 ? ctx.cart_items : 3;
  for (int i = 0; i < items && Room(12); ++i) {
    t1 = Rpc(s, kInventory, kReserve, kFSku | kFOrder, t1, [&](uint32_t r, uint64_t t2) {
      Stmt(
          "UPDATE stock SET available = available - $1, reserved = "
          "reserved + $1 WHERE sku = $2 AND available >= $1");
      Bind({LitInt(1 + fresh_rng.Below(3)),
            LitSku(i == 0 ? ctx.sku : (ctx.other_sku + 7919 * static_cast<uint32_t>(i)) % 20000,
                   true)});
      return Db(r, kInventoryDb, "UPDATE inventory.stock", "UPDATE", "stock", "reserve", t2);
    });
  }
  if (Room(4)) {
    t1 = Rpc(s, kPayment, kCharge, kFOrder | kFPrice, t1, [&](uint32_t p, uint64_t t2) {
      t2 = Internal(p, "fraud check", "fraudCheck", kFPrice, t2, 4000);
      path.assign("/v1/payment_intents");
      if (fresh) {  // the provider's id of the payment, as its API has it
        path += "/pi_";
        AppendHex(path, fresh_rng.Next(), 16);
        AppendHex(path, fresh_rng.Next() >> 32, 8);
        path += "/confirm";
      }
      return External(p, "POST", "api.payments.example.com", path, 200, t2, 90000);
    });
  }
  if (Room(3)) t1 = Leaf(s, kShipping, kGetQuote, kFOrder, t1, 600);
  if (Room(1)) {
    Stmt(
        "INSERT INTO orders (id, user_id, total_cents, currency, status, created_at) "
        "VALUES ($1, $2, $3, $4, 'placed', now())",
        "INSERT INTO orders (id, user_id, total_cents, currency, status, created_at) "
        "VALUES ($1, $2, $3, $4, 'placed', $5)");
    Bind({LitInt(ctx.order_id), LitInt(ctx.user),
          LitInt(static_cast<int64_t>(ctx.price * 100) * ctx.cart_items), "'USD'", LitTime(0)});
    t1 = Db(s, kOrdersDb, "INSERT orders.orders", "INSERT", "orders", "insertOrder", t1);
  }
  if (Room(5)) {
    t1 = Kafka(s, kEmail, t1, [&](uint32_t c, uint64_t t2) {
      t2 = Internal(c, "render confirmation", "render", kFOrder, t2, 6000);
      return External(c, "POST", "api.mail.example.com", "/v3/mail/send", 202, t2, 40000);
    });
  }
  if (Room(3)) {
    t1 = Rpc(s, kCart, kEmptyCart, 0, t1, [&](uint32_t e, uint64_t t2) {
      RedisKey("DEL", "cart:user-", ctx.user, 6);
      return Db(e, kCartRedis, "DEL", "DEL", "", "EmptyCartAsync", t2);
    });
  }
  return t1;
}

uint64_t TraceBuilder::OrderStatus(uint32_t fe, uint64_t t) {
  t = Rpc(fe, kCheckout, kGetOrder, kFOrder, t, [&](uint32_t s, uint64_t t1) {
    Stmt(
        "SELECT o.id, o.status, o.total_cents, i.sku, i.qty FROM orders o JOIN order_items "
        "i ON i.order_id = o.id WHERE o.id = $1 AND o.user_id = $2");
    Bind({LitInt(ctx.order_id), LitInt(ctx.user)});
    return Db(s, kOrdersDb, "SELECT orders.orders", "SELECT", "orders", "getOrder", t1);
  });
  if (rng.Chance(0.5)) t = Leaf(fe, kShipping, kTrackOrder, kFOrder, t, 800);
  return t;
}

uint64_t TraceBuilder::OrderList(uint32_t fe, uint64_t t) {
  return Rpc(fe, kCheckout, kListOrders, 0, t, [&](uint32_t s, uint64_t t1) {
    Stmt(
        "SELECT id, status, total_cents, created_at FROM orders WHERE user_id = $1 ORDER BY "
        "created_at DESC LIMIT 20",
        "SELECT id, status, total_cents, created_at FROM orders WHERE user_id = $1 AND "
        "created_at >= $2 ORDER BY created_at DESC LIMIT 20");
    Bind({LitInt(ctx.user), LitTime(90)});
    return Db(s, kOrdersDb, "SELECT orders.orders", "SELECT", "orders", "listOrders", t1);
  });
}

uint64_t TraceBuilder::OrderCancel(uint32_t fe, uint64_t t) {
  return Rpc(fe, kCheckout, kCancelOrder, kFOrder, t, [&](uint32_t s, uint64_t t1) {
    Stmt("UPDATE orders SET status = 'cancelled' WHERE id = $1 AND status = 'placed'");
    Bind({LitInt(ctx.order_id)});
    t1 = Db(s, kOrdersDb, "UPDATE orders.orders", "UPDATE", "orders", "cancelOrder", t1);
    return Kafka(s, kInventory, t1, [&](uint32_t c, uint64_t t2) {
      Stmt(
          "UPDATE stock SET available = available + r.qty FROM reservations r WHERE "
          "r.order_id = $1");
      Bind({LitInt(ctx.order_id)});
      return Db(c, kInventoryDb, "UPDATE inventory.stock", "UPDATE", "stock", "release", t2);
    });
  });
}

uint64_t TraceBuilder::Login(uint32_t fe, uint64_t t) {
  return Rpc(fe, kUser, kLogin, 0, t, [&](uint32_t s, uint64_t t1) {
    Stmt("SELECT id, password_hash, status FROM users WHERE email = $1");
    Bind({"'u" + LitPadded(ctx.user, 6) + "@mail.example.com'"});
    t1 = Db(s, kUsersDb, "SELECT users.users", "SELECT", "users", "find_by_email", t1);
    t1 = Internal(s, "verify password", "verify_password", 0, t1, 60000);
    stmt.assign("SETEX session:");
    AppendHex(stmt, ctx.session[0], 16);
    AppendHex(stmt, ctx.session[1], 16);
    stmt += " 86400 ?";
    Bind({"{\"user_id\":" + LitInt(ctx.user) + "}"});
    return Db(s, kCacheRedis, "SETEX", "SETEX", "", "create_session", t1);
  });
}

uint64_t TraceBuilder::Profile(uint32_t fe, uint64_t t) {
  return Rpc(fe, kUser, kGetUser, 0, t, [&](uint32_t s, uint64_t t1) {
    RedisKey("GET", "user:user-", ctx.user, 6);
    t1 = Db(s, kCacheRedis, "GET", "GET", "", "get_cached_user", t1);
    if (rng.Chance(0.3)) {
      Stmt("SELECT id, email, name, created_at, tier FROM users WHERE id = $1");
      Bind({LitInt(ctx.user)});
      t1 = Db(s, kUsersDb, "SELECT users.users", "SELECT", "users", "get_user", t1);
    }
    return t1;
  });
}

uint64_t TraceBuilder::ShipQuote(uint32_t fe, uint64_t t) {
  return Rpc(fe, kShipping, kGetQuote, kFQty, t, [&](uint32_t s, uint64_t t1) {
    Stmt("GET rates:zone:?");
    Bind({LitInt(ctx.zip / 100)});
    t1 = Db(s, kCacheRedis, "GET", "GET", "", "cached_rates", t1);
    return Internal(s, "compute rates", "compute_rates", kFQty, t1, 900);
  });
}

uint64_t TraceBuilder::Review(uint32_t fe, uint64_t t) {
  return Rpc(fe, kCatalog, kAddReview, kFSku, t, [&](uint32_t s, uint64_t t1) {
    t1 = Internal(s, "moderate review", "moderate", kFSku, t1, 8000);
    Stmt(
        "{\"insert\":\"reviews\",\"documents\":[{\"sku\":\"?\",\"rating\":\"?\","
        "\"text\":\"?\"}]}");
    Bind({LitSku(ctx.sku, false), LitInt(1 + fresh_rng.Below(5)), "love the " + Words(' ')});
    return Db(s, kReviewsMongo, "insert reviews.reviews", "insert", "reviews", "addReview", t1);
  });
}

}  // namespace spanhouse::loadgen::corpus
