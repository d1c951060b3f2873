// The reader's answer to the engine's errors: its time and row limits become
// messages a client can act on, never the engine's text.
#include "storage/clickhouse/chdb_span_reader.h"

#include <gtest/gtest.h>

namespace spanhouse::storage {
namespace {

TEST(ReaderError, LimitsBecomeClientMessages) {
  const ReaderLimits limits{.max_execution_s = 7, .max_spans = 10, .max_rows = 20};
  Status st = ReaderError(
      Status::Internal("Code: 159. DB::Exception: Timeout exceeded: elapsed 7.1 seconds, maximum: "
                       "7. (TIMEOUT_EXCEEDED) SELECT secret FROM spanhouse.spans"),
      limits, 20);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("time limit (7 s)"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("SELECT"), std::string::npos) << st.message();
  st = ReaderError(Status::Internal("Code: 396. DB::Exception: Limit for result exceeded, max "
                                    "rows: 20.00 (TOO_MANY_ROWS_OR_BYTES)"),
                   limits, 20);
  EXPECT_EQ(st.code(), StatusCode::kTooLarge);
  EXPECT_NE(st.message().find("limit of 20 rows"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("DB::Exception"), std::string::npos) << st.message();
}

TEST(ReaderError, OtherErrorsKeepTheirTextForTheLog) {
  const ReaderLimits limits;
  Status st = ReaderError(Status::Internal("Code: 62. DB::Exception: Syntax error"), limits, 1);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(), "Code: 62. DB::Exception: Syntax error");
  st = ReaderError(Status::Unavailable("chdb connection is closed"), limits, 1);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace spanhouse::storage
