// TSV as ClickHouse writes and reads it: results split into rows and
// fields, fields unescaped, and values escaped as a bound query parameter
// (which the server reads as one TSV field).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spanhouse::storage {

// The rows of a TSV result, each split at its tabs into fields (empty lines
// skipped). Fields are as the engine wrote them, not unescaped: for numbers,
// names and other values without tabs, newlines or backslashes.
std::vector<std::vector<std::string>> TsvRows(std::string_view tsv);

// A TSV field as the engine escapes it (\t, \n, \\, \0, ...) back to its bytes.
std::string UnescapeTsv(std::string_view field);

// `v` escaped as one TSV field: how a query parameter's value is sent.
std::string EscapeTsv(std::string_view v);

}  // namespace spanhouse::storage
