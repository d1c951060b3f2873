// The OpenSearch sink against a canned cluster: what its _bulk requests hold.
#include "storage/opensearch/opensearch_sink.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "storage/opensearch/jaeger_document.h"
#include "testdata/sample_batch.h"
#include "unit/storage/canned_http_server.h"

namespace spanhouse::storage::opensearch {
namespace {

std::shared_ptr<OpenSearchClient> ClientFor(const std::string& url) {
  OpenSearchOptions o;
  o.urls = {url};
  std::unique_ptr<OpenSearchClient> c;
  EXPECT_TRUE(OpenSearchClient::Create(o, &c).ok());
  return std::shared_ptr<OpenSearchClient>(std::move(c));
}

// The _ids of the documents `bulks` create or index in indices named
// `<prefix>...`.
std::set<std::string> DocumentIds(const std::vector<std::string>& bulks, std::string_view prefix) {
  std::set<std::string> ids;
  simdjson::dom::parser parser;
  for (const std::string& body : bulks) {
    size_t line = 0;
    for (size_t pos = 0; pos < body.size(); ++line) {
      size_t nl = body.find('\n', pos);
      if (nl == std::string::npos) nl = body.size();
      const std::string text = body.substr(pos, nl - pos);
      pos = nl + 1;
      if (line % 2 != 0) continue;  // a document; actions come first
      simdjson::dom::element action;
      EXPECT_EQ(parser.parse(text).get(action), simdjson::SUCCESS) << text;
      simdjson::dom::object o;
      EXPECT_EQ(action.get_object().get(o), simdjson::SUCCESS);
      const simdjson::dom::element meta = (*o.begin()).value;
      std::string_view index;
      std::string_view id;
      EXPECT_EQ(meta["_index"].get_string().get(index), simdjson::SUCCESS);
      EXPECT_EQ(meta["_id"].get_string().get(id), simdjson::SUCCESS);
      if (index.starts_with(prefix)) ids.emplace(id);
    }
  }
  return ids;
}

// Spans sampled out (metrics_only) are no document, neither a span's nor
// its operation's in the service index; a request of only such spans is
// done without a write, and every span is accounted for.
TEST(OpenSearchSink, SpansSampledOutAreNoDocument) {
  CannedServer server([](const CannedServer::Request& r) -> CannedServer::Answer {
    if (r.target.starts_with("/_bulk")) return {200, R"({"took":1,"errors":false,"items":[]})"};
    return {200, R"({"acknowledged":true})"};  // the index templates
  });
  OpenSearchSinkOptions o;
  o.workers = 1;
  o.dead_letter_dir = ::testing::TempDir() + "/opensearch-sink-test-" + std::to_string(getpid());
  std::unique_ptr<sink::Sink> made = MakeOpenSearchSink(ClientFor(server.url()), o);
  sink::Sink& sink = *made;
  ASSERT_TRUE(sink.Start().ok());
  // Two traces of three spans: the "db" service's spans (the third of
  // each) sampled out, and the first trace's root.
  SpanBatch mixed = testdata::SampleBatch(2);
  std::set<std::string> want;
  for (uint32_t i = 0; i < mixed.span_count(); ++i) {
    mixed.spans.metrics_only[i] = i % 3 == 2 || i == 0 ? 1 : 0;
    if (mixed.spans.metrics_only[i] == 0) want.insert(SpanDocumentId(mixed, i));
  }
  ASSERT_EQ(want.size(), 3u);
  // A request whose spans were all sampled out.
  SpanBatch out = testdata::SampleBatch(1);
  for (auto& id : out.spans.trace_id) id[15] ^= 0x5a;
  for (auto& m : out.spans.metrics_only) m = 1;
  for (SpanBatch* b : {&out, &mixed}) {
    sink::QueuedBatch item;
    item.batch = std::make_unique<SpanBatch>(*b);
    ASSERT_TRUE(sink.Push(item).ok());
  }
  sink.Drain();
  std::vector<std::string> bulks;
  for (const auto& r : server.requests()) {
    if (r.target.starts_with("/_bulk")) bulks.push_back(r.body);
  }
  ASSERT_FALSE(bulks.empty());
  EXPECT_EQ(DocumentIds(bulks, "jaeger-span-"), want);
  // Operations of spans kept only: "db"'s SELECT was only ever sampled out.
  const std::set<std::string> services = DocumentIds(bulks, "jaeger-service-");
  EXPECT_EQ(services, (std::set<std::string>{ServiceDocumentId("frontend", "GET /cart"),
                                             ServiceDocumentId("frontend", "cart.load")}));
  EXPECT_EQ(sink.stats().rows_written.load(), 3u);
  EXPECT_EQ(sink.stats().pending_rows.load(), 0u);
  EXPECT_EQ(sink.stats().rows_left_queued.load(), 0u);
  EXPECT_EQ(sink.queued_bytes(), 0u);
}

// The lines of an NDJSON body.
std::vector<std::string> Lines(const std::string& body) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < body.size();) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    out.push_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// A _bulk answered in the form its filter_path asks for (per item only its
// status, and an error where refused): the items refused for now (429) are
// sent again, alone and whole (action and document as the first time); those
// done (201, 409) are not.
TEST(OpenSearchSink, SendsAgainOnlyTheItemsRefusedForNow) {
  std::atomic<int> bulk_calls{0};
  CannedServer server([&](const CannedServer::Request& r) -> CannedServer::Answer {
    if (!r.target.starts_with("/_bulk")) return {200, R"({"acknowledged":true})"};
    EXPECT_NE(r.target.find("filter_path="), std::string::npos) << r.target;
    const size_t items = Lines(r.body).size() / 2;
    std::string answer;
    if (bulk_calls++ == 0) {
      // The second item refused for now, the third already there.
      answer = R"({"errors":true,"items":[)";
      for (size_t i = 0; i < items; ++i) {
        if (i != 0) answer += ',';
        answer += i == 1   ? R"({"create":{"status":429,"error":{"type":"x","reason":"busy"}}})"
                  : i == 2 ? R"({"create":{"status":409,"error":{"type":"y","reason":"exists"}}})"
                           : R"({"create":{"status":201}})";
      }
      answer += "]}";
    } else {
      answer = R"({"errors":false,"items":[)";
      for (size_t i = 0; i < items; ++i)
        answer += i == 0 ? R"({"create":{"status":201}})" : R"(,{"create":{"status":201}})";
      answer += "]}";
    }
    return {200, answer};
  });
  OpenSearchSinkOptions o;
  o.workers = 1;
  o.backoff_min = std::chrono::milliseconds(1);
  o.backoff_max = std::chrono::milliseconds(5);
  o.dead_letter_dir = ::testing::TempDir() + "/opensearch-sink-retry-" + std::to_string(getpid());
  std::unique_ptr<sink::Sink> made = MakeOpenSearchSink(ClientFor(server.url()), o);
  sink::Sink& sink = *made;
  ASSERT_TRUE(sink.Start().ok());
  const SpanBatch batch = testdata::SampleBatch(2);
  sink::QueuedBatch item;
  item.batch = std::make_unique<SpanBatch>(batch);
  ASSERT_TRUE(sink.Push(item).ok());
  sink.Drain();
  std::vector<std::string> bulks;
  for (const auto& r : server.requests()) {
    if (r.target.starts_with("/_bulk")) bulks.push_back(r.body);
  }
  ASSERT_EQ(bulks.size(), 2u);
  const std::vector<std::string> first = Lines(bulks[0]);
  // Every span's document and each operation's once, as action and source.
  ASSERT_GE(first.size(), 2 * batch.span_count());
  EXPECT_EQ(bulks[1], first[2] + "\n" + first[3] + "\n");
  EXPECT_EQ(sink.stats().rows_written.load(), batch.span_count());
  EXPECT_EQ(sink.stats().pending_rows.load(), 0u);
}

}  // namespace
}  // namespace spanhouse::storage::opensearch
