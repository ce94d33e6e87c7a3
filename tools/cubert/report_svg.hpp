// SPDX-License-Identifier: Apache-2.0
// Text and geometry helpers of the tune/bench HTML report: escaping, number labels, chart axes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cubert::cli::report {

/// Escapes text for HTML element content and for attribute values in either kind of quotes;
/// C0 control characters other than tab and newline become U+FFFD (HTML forbids them).
[[nodiscard]] std::string escape_html(std::string_view text);

/// The first `max_chars` code points of UTF-8 `text`, with "…" in place of the rest; never
/// splits a multi-byte sequence.
[[nodiscard]] std::string truncate_utf8(std::string_view text, std::size_t max_chars);

/// An SVG coordinate or length with one decimal; a non-finite value becomes "0" so that a bad
/// figure can never put "nan" or "inf" into the markup.
[[nodiscard]] std::string coord(double v);

/// `v` with three significant digits and an SI prefix before `unit` ("178 GFLOP/s", "1.2 kB");
/// "—" when `v` is not finite.
[[nodiscard]] std::string format_si(double v, std::string_view unit);

/// A duration given in nanoseconds, in the unit that reads best ("12.3 ms", "850 ns").
[[nodiscard]] std::string format_duration_ns(double ns);

/// `v` with up to `digits` significant digits and no exponent for everyday magnitudes, for
/// table cells that should paste into a spreadsheet as numbers; "—" when not finite.
[[nodiscard]] std::string format_plain(double v, int digits = 4);

/// A time unit for one chart: nanoseconds per unit and its symbol.
struct time_unit {
  double ns_per_unit;
  std::string_view symbol;
};

/// The unit whose values for `max_ns` land between 1 and 1000.
[[nodiscard]] time_unit pick_time_unit(double max_ns);

/// A linear axis from 0 to `max`, ticked every `step` (1, 2 or 5 times a power of ten).
struct linear_axis {
  double max = 1.0;
  double step = 1.0;
  std::vector<double> ticks;  ///< 0, step, ..., max.

  /// Maps `v` onto [p0, p1]; values outside [0, max] are clamped.
  [[nodiscard]] double map(double v, double p0, double p1) const;
};

/// About `target_ticks` intervals covering [0, max]; a non-positive or non-finite `max` gives
/// the axis [0, 1].
[[nodiscard]] linear_axis nice_linear_axis(double max, int target_ticks = 5);

/// A logarithmic axis spanning whole decades, 10^lo_exp to 10^hi_exp.
struct log_axis {
  int lo_exp = 0;
  int hi_exp = 1;
  std::vector<int> tick_exps;  ///< Labelled decades, ascending, first lo_exp, last hi_exp.
  bool minor = true;           ///< Whether 2..9 × each decade are worth gridlines (step 1).

  [[nodiscard]] double lo() const;
  [[nodiscard]] double hi() const;
  /// Maps `v` onto [p0, p1] by its logarithm; values outside the axis (or <= 0) are clamped.
  [[nodiscard]] double map(double v, double p0, double p1) const;
};

/// The decades covering [lo, hi] with at most `max_ticks` labels (every decade, or every 2nd,
/// 3rd, ... when the span is wide). Bad bounds (<= 0, non-finite) fall back to [1, 10]; a span
/// inside one decade is widened to a full decade.
[[nodiscard]] log_axis nice_log_axis(double lo, double hi, int max_ticks = 10);

/// A decade's label: "0.001" ... "1000" for |exp| <= 3, else "1e-5" / "1e6"; with `si`, SI
/// prefixes instead for large values ("1 G", "100 T").
[[nodiscard]] std::string decade_label(int exp, bool si);

}  // namespace cubert::cli::report
