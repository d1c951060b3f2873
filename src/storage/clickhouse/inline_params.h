// Query parameters written into the SQL as literals, for ClickHouse servers
// older than 19.x (Debian's 18.16): they have no query parameters, so a
// statement written with {name:Type} placeholders is sent with each value
// as a literal the old parser reads back to exactly the bound value.
//
// The values are what SqlConnection::Run takes: a String parameter's raw
// bytes (any bytes: NUL, invalid UTF-8, quotes); a number's decimal text; an
// array's text form as the engine reads a bound array, ['a','b'] or [1,2]
// (elements quoted with backslash escapes). Every value is checked against
// its type and rewritten, never copied into the SQL as it came: a value that
// is not of its type is kInvalidArgument.
//
// The literals, each read by 18.16 as the bound value:
// - String: '...' escaping \ and ' with a backslash and bytes below 0x20
//   and 0x7F as \xHH; other bytes (UTF-8 or not) as they are.
// - Integers: plain decimal (LIMIT takes nothing but a number literal in
//   18.16), negative ones in parentheses (`x-{p:Int64}` must not become a
//   `--` comment). The literal has the value's smallest type, as any number
//   literal does, not necessarily the placeholder's.
// - Float64: the shortest text that reads back to the same double, with a
//   '.' or an exponent so that it is a Float64 (inf, nan; -0 stays -0);
//   subnormals, which 18.16 reads as 0, as reinterpretAsFloat64(unhex(..)).
// - Array(T): CAST([e1,e2] AS Array(T)), the elements as above; typed, so
//   that an empty array is not Array(Nothing). 18.16 does not take an array
//   as the right side of IN (write has(arr, x)).
//
// A placeholder is `{` name `:` type `}` outside quoted strings, quoted
// identifiers and comments; text inside them is copied unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

// `sql` with every placeholder replaced by its parameter's literal, in
// `out`. Types: String, Int8/16/32/64, UInt8/16/32/64, Float64 and Array of
// any of them. kInvalidArgument for a placeholder whose name has no
// parameter (or two of different values), a type outside that list, or a
// value that is not of its type. Parameters no placeholder uses are ignored.
Status InlineParams(std::string_view sql, const std::vector<QueryParam>& params, std::string* out);

}  // namespace spanhouse::storage
