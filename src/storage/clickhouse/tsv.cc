#include "storage/clickhouse/tsv.h"

namespace spanhouse::storage {

std::string EscapeTsv(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\0':
        out += "\\0";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::vector<std::string>> TsvRows(std::string_view tsv) {
  std::vector<std::vector<std::string>> rows;
  for (size_t pos = 0; pos < tsv.size();) {
    size_t nl = tsv.find('\n', pos);
    if (nl == std::string_view::npos) nl = tsv.size();
    std::string_view line = tsv.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::vector<std::string>& f = rows.emplace_back();
    for (size_t a = 0;;) {
      const size_t tab = line.find('\t', a);
      f.emplace_back(
          line.substr(a, tab == std::string_view::npos ? std::string_view::npos : tab - a));
      if (tab == std::string_view::npos) break;
      a = tab + 1;
    }
  }
  return rows;
}

std::string UnescapeTsv(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\' || i + 1 == field.size()) {
      out += field[i];
      continue;
    }
    const char c = field[++i];
    switch (c) {
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case '0':
        out += '\0';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'a':
        out += '\a';
        break;
      case 'v':
        out += '\v';
        break;
      default:  // \\, \', and any other escaped character stand for themselves
        out += c;
    }
  }
  return out;
}

}  // namespace spanhouse::storage
