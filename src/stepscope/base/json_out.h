// Writing JSON fast, for the timeline (a hot path: a trace of a 10,000-node step is written
// after every traced step). Text goes through a fixed local buffer with raw-pointer writes and
// reaches the destination std::string in large appends (or a writer, in pieces of the buffer's
// size: a file being written): no allocation per value, no streams.
// Strings are escaped for JSON (quotes, backslashes, control characters) and invalid UTF-8 is
// replaced by U+FFFD, so whatever a node is named, the file parses.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace stepscope::json_out {

class Sink {
 public:
  explicit Sink(std::string& out) : out_(&out), p_(buf_) {}
  // Each full buffer goes to `write` (which must outlive the Sink and not throw).
  explicit Sink(const std::function<void(std::string_view)>& write) : write_(&write), p_(buf_) {}
  ~Sink() { flush(); }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void flush() {
    emit({buf_, static_cast<size_t>(p_ - buf_)});
    p_ = buf_;
  }
  // Room for n more bytes (n ≤ kCapacity).
  char* room(size_t n) {
    if (static_cast<size_t>(end() - p_) < n) flush();
    return p_;
  }
  void advance(char* to) { p_ = to; }

  void raw(std::string_view s) {
    if (s.size() > kCapacity / 2) {
      flush();
      emit(s);
      return;
    }
    char* p = room(s.size());
    std::memcpy(p, s.data(), s.size());
    p_ = p + s.size();
  }
  template <size_t N>
  void lit(const char (&s)[N]) {  // a string literal, without its terminating zero
    char* p = room(N - 1);
    std::memcpy(p, s, N - 1);
    p_ = p + N - 1;
  }
  void ch(char c) {
    char* p = room(1);
    *p = c;
    p_ = p + 1;
  }

  void i64(int64_t v) {
    char* p = room(24);
    p_ = std::to_chars(p, p + 24, v).ptr;
  }
  void u64(uint64_t v) {
    char* p = room(24);
    p_ = std::to_chars(p, p + 24, v).ptr;
  }
  // Nanoseconds as microseconds with exactly three decimals: 1234567 -> "1234.567".
  void micros(int64_t ns) {
    char* p = room(32);
    uint64_t v;
    if (ns < 0) {
      *p++ = '-';
      v = 0 - static_cast<uint64_t>(ns);
    } else {
      v = static_cast<uint64_t>(ns);
    }
    p = std::to_chars(p, p + 24, v / 1000).ptr;
    const unsigned frac = static_cast<unsigned>(v % 1000);
    p[0] = '.';
    p[1] = static_cast<char>('0' + frac / 100);
    p[2] = static_cast<char>('0' + frac / 10 % 10);
    p[3] = static_cast<char>('0' + frac % 10);
    p_ = p + 4;
  }

  // A JSON string: quotes, escapes and all.
  void str(std::string_view s) {
    ch('"');
    str_body(s);
    ch('"');
  }
  // The escaped characters of s, without quotes (to build a string from pieces).
  void str_body(std::string_view s);

 private:
  static constexpr size_t kCapacity = 1 << 15;
  char* end() { return buf_ + kCapacity; }
  void emit(std::string_view s) {
    if (out_)
      out_->append(s);
    else if (!s.empty())
      (*write_)(s);
  }
  std::string* out_ = nullptr;
  const std::function<void(std::string_view)>* write_ = nullptr;
  char* p_;
  char buf_[kCapacity];
};

// True for the bytes that may be copied into a JSON string as they are (printable ASCII but the
// quote and the backslash).
inline constexpr struct PlainTable {
  bool plain[256];
  constexpr PlainTable() : plain{} {
    for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  }
} kPlain{};

// Length of the valid UTF-8 sequence at s[i] (which is ≥ 0x80), or 0 when it is not one.
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t left = s.size() - i;
  auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

// Whether all 8 bytes of w are plain: none below 0x20, no quote, no backslash, none ≥ 0x80
// (the has-zero-byte and has-less-than tricks, exact for the word as a whole).
inline bool plain_word(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
  const uint64_t hits = ((w - kOnes * 0x20) & ~w)             // a byte below 0x20
                        | ((quote - kOnes) & ~quote)          // a quote
                        | ((backslash - kOnes) & ~backslash)  // a backslash
                        | w;                                  // a byte of 0x80 or more
  return (hits & kHighs) == 0;
}

inline void Sink::str_body(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // A run of plain bytes, copied at once (in pieces that fit the buffer); eight at a time
    // while they are all plain.
    size_t j = i;
    while (j + 8 <= s.size()) {
      uint64_t w;
      std::memcpy(&w, s.data() + j, 8);
      if (!plain_word(w)) break;
      j += 8;
    }
    while (j < s.size() && kPlain.plain[static_cast<unsigned char>(s[j])]) ++j;
    while (i < j) {
      const size_t n = std::min(j - i, kCapacity / 2);
      char* p = room(n);
      std::memcpy(p, s.data() + i, n);
      p_ = p + n;
      i += n;
    }
    if (i == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, i);
      if (n) {
        char* p = room(n);
        std::memcpy(p, s.data() + i, n);
        p_ = p + n;
        i += n;
      } else {
        lit("\\ufffd");
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"':
        lit("\\\"");
        break;
      case '\\':
        lit("\\\\");
        break;
      case '\n':
        lit("\\n");
        break;
      case '\r':
        lit("\\r");
        break;
      case '\t':
        lit("\\t");
        break;
      case '\b':
        lit("\\b");
        break;
      case '\f':
        lit("\\f");
        break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        char* p = room(6);
        std::memcpy(p, "\\u00", 4);
        p[4] = kHex[c >> 4];
        p[5] = kHex[c & 15];
        p_ = p + 6;
      }
    }
    ++i;
  }
}

// Appends s as a JSON string literal (for the writers that build a std::string directly).
inline void append_string(std::string& out, std::string_view s) {
  Sink sink(out);
  sink.str(s);
}

// Re-indents compact JSON (as the Sink writes it) the way Python's json.dumps(indent=4,
// separators=(",", ": ")) lays it out, which is what TensorFlow's pretty timelines look like.
void append_pretty(std::string& out, std::string_view compact, int indent = 4);

}  // namespace stepscope::json_out
