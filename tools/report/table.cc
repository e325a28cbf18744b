#include "table.h"

#include <fmt/format.h>

#include <utility>

namespace kolo::bench {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

std::string Table::Line(char lead,
                        const std::vector<std::string>& cells) const {
  std::string line(1, lead);
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& column = columns_[i];
    const std::string& cell = i < cells.size() ? cells[i] : std::string();
    line += ' ';
    if (column.left_align) {
      line += fmt::format("{:<{}}", cell, column.width);
    } else {
      line += fmt::format("{:>{}}", cell, column.width);
    }
  }
  // Left-aligned last columns would otherwise leave trailing blanks.
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::vector<std::string> Table::HeaderLines() const {
  std::vector<std::string> lines;

  bool any_group = false;
  bool any_unit = false;
  for (const Column& column : columns_) {
    any_group = any_group || !column.group.empty();
    any_unit = any_unit || !column.unit.empty();
  }

  if (any_group) {
    // Each run of columns sharing a group spans their widths plus the single
    // spaces between them; the label is centred in that span.
    std::string line = "#";
    size_t i = 0;
    while (i < columns_.size()) {
      size_t end = i + 1;
      int span = columns_[i].width;
      while (end < columns_.size() && !columns_[i].group.empty() &&
             columns_[end].group == columns_[i].group) {
        span += 1 + columns_[end].width;
        ++end;
      }
      line += ' ';
      line += fmt::format("{:^{}}", columns_[i].group, span);
      i = end;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  }

  std::vector<std::string> titles;
  std::vector<std::string> units;
  for (const Column& column : columns_) {
    titles.push_back(column.title);
    units.push_back(column.unit);
  }
  lines.push_back(Line('#', titles));
  if (any_unit) lines.push_back(Line('#', units));
  return lines;
}

std::string Table::Row(const std::vector<std::string>& cells) const {
  return Line(' ', cells);
}

std::string FormatFixed(double value, int decimals) {
  return fmt::format("{:.{}f}", value, decimals);
}

}  // namespace kolo::bench
