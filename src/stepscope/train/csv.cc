#include "stepscope/train/csv.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"

namespace stepscope {

namespace {

std::string quoted_field(std::string_view field) {
  if (field.size() > 40) return "'" + std::string(field.substr(0, 40)) + "...'";
  return "'" + std::string(field) + "'";
}

struct CsvParser {
  const std::string& path;
  const CsvOptions& options;
  int64_t line_number = 0;

  [[noreturn]] void fail(const std::string& message) const {
    throw InvalidArgumentError(path + ":" + std::to_string(line_number) + ": " + message);
  }

  [[noreturn]] void fail_field(const char* b, const char* e, size_t column, bool out_of_range, DType dtype) const {
    while (b < e && (*b == ' ' || *b == '\t')) ++b;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) --e;
    const std::string field = quoted_field(std::string_view(b, e - b)),
                      where = " in column " + std::to_string(column + 1);
    if (out_of_range) fail(field + " is out of range for " + std::string(dtype_name(dtype)) + where);
    fail("cannot parse " + field + (is_integer(dtype) ? " as an integer" : " as a number") + where);
  }

  // Parses the field starting at p into `value`; returns where it ends (at the delimiter or e).
  template <typename T>
  const char* parse_field(const char* p, const char* e, char delim, size_t column, T& value) const {
    // Fast path for plain numbers ("13", "-2.25"): no call, no search. Decimals take Clinger's
    // exact case (mantissa and power of ten both exact in T: one correctly rounded division), so
    // the result is the one from_chars gives; anything else falls through to from_chars.
    const char* q = p;
    const bool negative = q < e && *q == '-';
    q += negative;
    const char* digits = q;
    uint64_t acc = 0;
    while (q < e && static_cast<unsigned>(*q - '0') < 10 && q - digits < 18) acc = acc * 10 + (*q++ - '0');
    int decimals = 0;
    if constexpr (std::is_floating_point_v<T>) {
      if (q > digits && q < e && *q == '.') {
        const char* f = ++q;
        while (q < e && static_cast<unsigned>(*q - '0') < 10 && q - digits < 19) acc = acc * 10 + (*q++ - '0');
        decimals = static_cast<int>(q - f);
      }
    }
    if (q > digits && (q == e || *q == delim)) {
      if constexpr (std::is_integral_v<T>) {
        if (acc <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
          value = negative ? -static_cast<T>(acc) : static_cast<T>(acc);
          return q;
        }
      } else {
        constexpr bool is_float = std::is_same_v<T, float>;
        static constexpr T kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        if (decimals == 0 || (acc <= (is_float ? (1ull << 24) : (1ull << 53)) && decimals <= (is_float ? 10 : 22))) {
          T m = static_cast<T>(acc);  // correctly rounded when there are no decimals
          if (decimals) m /= kPow10[decimals];
          value = negative ? -m : m;
          return q;
        }
      }
    }
    const char* end = q;  // the field's end: nothing before q is a delimiter
    while (end < e && *end != delim) ++end;
    const char* b = p;
    const char* fe = end;
    while (b < fe && (*b == ' ' || *b == '\t')) ++b;
    while (fe > b && (fe[-1] == ' ' || fe[-1] == '\t')) --fe;
    if (b + 1 < fe && *b == '+' && b[1] != '-') ++b;  // from_chars takes no '+'
    const auto [stop, ec] = std::from_chars(b, fe, value);
    if (ec != std::errc() || stop != fe || b == fe)
      fail_field(p, end, column, ec == std::errc::result_out_of_range && stop == fe, dtype_of<T>);
    return end;
  }

  // Parses every row into a features table and (when there is a label column) a label vector.
  template <typename F, typename L>
  std::vector<Tensor> parse(std::string_view text) {
    const char delim = options.delimiter;
    const char* p = text.data();
    const char* const end = p + text.size();
    auto next_line = [&](const char*& b, const char*& e) {
      b = p;
      e = static_cast<const char*>(std::memchr(p, '\n', end - p));
      if (!e) e = end;
      p = e < end ? e + 1 : end;
      if (e > b && e[-1] == '\r') --e;
      ++line_number;
    };
    const char *b, *e;
    for (int i = 0; i < options.header_lines && p < end; ++i) next_line(b, e);

    size_t columns = 0, label = SIZE_MAX, features = 0;
    std::vector<F> x;
    std::vector<L> y;
    int64_t rows = 0;
    while (p < end) {
      next_line(b, e);
      if (std::all_of(b, e, [](char c) { return c == ' ' || c == '\t'; })) continue;
      if (columns == 0) {  // the first row decides the layout
        columns = static_cast<size_t>(std::count(b, e, delim)) + 1;
        if (options.label_column) {
          const int64_t l =
              *options.label_column < 0 ? int64_t(columns) + *options.label_column : *options.label_column;
          if (l < 0 || l >= int64_t(columns))
            fail("label_column " + std::to_string(*options.label_column) + " is out of range for " +
                 std::to_string(columns) + " columns");
          label = static_cast<size_t>(l);
        }
        features = columns - (label == SIZE_MAX ? 0 : 1);
        const int64_t estimate = std::count(p, end, '\n') + 2;
        x.reserve(static_cast<size_t>(estimate) * features);
        if (label != SIZE_MAX) y.reserve(static_cast<size_t>(estimate));
      }
      const char* f = b;
      for (size_t c = 0; c < columns; ++c) {
        const char* fe =
            c == label ? parse_field(f, e, delim, c, y.emplace_back()) : parse_field(f, e, delim, c, x.emplace_back());
        if ((fe == e) != (c + 1 == columns))
          fail("expected " + std::to_string(columns) + " fields, got " + std::to_string(std::count(b, e, delim) + 1));
        f = fe + 1;
      }
      ++rows;
    }
    if (rows == 0) throw InvalidArgumentError(path + ": no data rows");
    std::vector<Tensor> table;
    table.emplace_back(dtype_of<F>, Shape{rows, static_cast<int64_t>(features)});
    if (!x.empty()) std::memcpy(table.back().raw_data(), x.data(), x.size() * sizeof(F));
    if (label != SIZE_MAX) {
      table.emplace_back(dtype_of<L>, Shape{rows});
      std::memcpy(table.back().raw_data(), y.data(), y.size() * sizeof(L));
    }
    return table;
  }
};

void check_csv_dtype(DType d, const char* what) {
  if (d != DType::kFloat32 && d != DType::kFloat64 && d != DType::kInt32 && d != DType::kInt64)
    throw InvalidArgumentError(std::string("CsvOptions: ") + what + " must be float32, float64, int32 or int64, got " +
                               std::string(dtype_name(d)));
}

// dispatch_numeric for the dtypes a CSV column may have (checked beforehand).
template <typename F>
decltype(auto) dispatch_csv(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(double{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    default:
      return f(float{});
  }
}

}  // namespace

std::vector<Tensor> parse_csv_table(std::string_view bytes, const CsvOptions& options, const std::string& source) {
  check_csv_dtype(options.feature_dtype, "feature_dtype");
  check_csv_dtype(options.label_dtype, "label_dtype");
  if (std::string_view("\n\r0123456789.+-eE").find(options.delimiter) != std::string_view::npos)
    throw InvalidArgumentError(
        std::string("CsvOptions: the delimiter cannot be a line break or part of a number, got '") + options.delimiter +
        "'");
  std::string inflated;
  if (is_gzip(bytes)) bytes = inflated = gunzip(bytes, source, options.max_decompressed_bytes);
  CsvParser parser{source, options};
  return dispatch_csv(options.feature_dtype, [&](auto f) {
    return dispatch_csv(options.label_dtype, [&](auto l) { return parser.parse<decltype(f), decltype(l)>(bytes); });
  });
}

std::vector<Tensor> read_csv_table(const std::string& path, const CsvOptions& options) {
  // The raw bytes: parse_csv_table inflates them, under the options' bound.
  return parse_csv_table(read_file(path, 0, Gunzip::kNever), options, path);
}

}  // namespace stepscope
