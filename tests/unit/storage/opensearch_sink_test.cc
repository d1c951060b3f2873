// The OpenSearch sink against a canned cluster: what its _bulk requests hold.
#include "storage/opensearch/opensearch_sink.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

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
    if (r.target == "/_bulk") return {200, R"({"took":1,"errors":false,"items":[]})"};
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
    if (r.target == "/_bulk") bulks.push_back(r.body);
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

}  // namespace
}  // namespace spanhouse::storage::opensearch
