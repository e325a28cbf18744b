// A fixed-width text table in the layout nccl-tests made familiar: header
// lines start with '#' and data rows with a space, so `grep -v '^#'` leaves
// only numbers, and every cell is padded to its column's width so the
// columns line up under their titles.
//
// Thread-safety: immutable after construction; safe to share.
#ifndef KOLO_TOOLS_REPORT_TABLE_H_
#define KOLO_TOOLS_REPORT_TABLE_H_

#include <string>
#include <vector>

namespace kolo::bench {

class Table {
 public:
  struct Column {
    std::string title;  // "time"
    std::string unit;   // "(us)", or empty
    int width = 8;      // cells wider than this push the rest of the row right
    // Consecutive columns with the same non-empty group get one label
    // centred over them ("out-of-place").
    std::string group;
    bool left_align = false;
  };

  explicit Table(std::vector<Column> columns);

  // The group line (only when some column has a group), the titles, and the
  // units (only when some column has a unit), each starting with '#'.
  std::vector<std::string> HeaderLines() const;
  // One data row. Missing trailing cells print empty and extra cells are
  // ignored, so a row can never shift the columns after it.
  std::string Row(const std::vector<std::string>& cells) const;

  const std::vector<Column>& columns() const { return columns_; }

 private:
  std::string Line(char lead, const std::vector<std::string>& cells) const;

  std::vector<Column> columns_;
};

// `value` with exactly `decimals` digits after the point ("12.50").
std::string FormatFixed(double value, int decimals);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_TABLE_H_
