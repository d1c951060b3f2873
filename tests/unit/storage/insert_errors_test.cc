#include "storage/clickhouse/insert_errors.h"

#include <gtest/gtest.h>

namespace spanhouse::storage {
namespace {

TEST(InsertErrors, CodeIsReadFromTheEngineMessage) {
  EXPECT_EQ(ClickHouseErrorCode("Code: 252. DB::Exception: Too many parts (300)."), 252);
  EXPECT_EQ(ClickHouseErrorCode("no code here"), -1);
  EXPECT_EQ(ClickHouseErrorCode("Code: x."), -1);
}

TEST(InsertErrors, ClassifiedByCode) {
  auto classify = [](const char* m) { return ClassifyInsertError(Status::Internal(m)); };
  EXPECT_EQ(classify("Code: 252. DB::Exception: Too many parts"), InsertError::kRetryable);
  EXPECT_EQ(classify("Code: 241. DB::Exception: Memory limit exceeded"), InsertError::kRetryable);
  EXPECT_EQ(classify("Code: 159. DB::Exception: Timeout exceeded"), InsertError::kRetryable);
  EXPECT_EQ(classify("Code: 53. DB::Exception: Type mismatch"), InsertError::kPermanent);
  EXPECT_EQ(classify("Code: 117. DB::Exception: Incorrect data"), InsertError::kPermanent);
  EXPECT_EQ(classify("Code: 99999. DB::Exception: something new"), InsertError::kUnknown);
  // No code: the spool file or the connection, not the data.
  EXPECT_EQ(classify("short write to /spool/insert-0-spans.native"), InsertError::kRetryable);
  EXPECT_EQ(ClassifyInsertError(Status::Unavailable("injected insert failure")),
            InsertError::kRetryable);
}

}  // namespace
}  // namespace spanhouse::storage
