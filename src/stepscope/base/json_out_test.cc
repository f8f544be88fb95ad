#include "stepscope/base/json_out.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace stepscope::json_out {
namespace {

std::string as_json_string(std::string_view s) {
  std::string out;
  {
    Sink sink(out);
    sink.str(s);
  }
  return out;
}

// Every byte value at every position of a string long enough for the eight-at-a-time path:
// ASCII comes back as it was, a lone byte of 0x80 or more as U+FFFD; nothing raw below 0x20.
TEST(JsonOut, EveryByteAtEveryPositionIsEscapedOrKept) {
  for (int b = 0; b < 256; ++b) {
    for (size_t at = 0; at < 24; ++at) {
      std::string s(24, 'a');
      s[at] = static_cast<char>(b);
      const std::string text = as_json_string(s);
      for (char c : text) ASSERT_GE(static_cast<unsigned char>(c), 0x20) << b << " at " << at;
      const std::string back = nlohmann::json::parse(text).get<std::string>();
      std::string want = s;
      if (b >= 0x80) want.replace(at, 1, "\xef\xbf\xbd");
      ASSERT_EQ(back, want) << b << " at " << at;
    }
  }
}

TEST(JsonOut, ValidUtf8IsKeptAndInvalidReplaced) {
  const std::string ok = "\xce\xbb \xe2\x82\xac \xf0\x9f\x98\x80 long enough to take the fast path";
  EXPECT_EQ(nlohmann::json::parse(as_json_string(ok)).get<std::string>(), ok);
  // Overlong, surrogate, truncated, beyond U+10FFFF.
  for (std::string bad : {"\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80"}) {
    const std::string back = nlohmann::json::parse(as_json_string("x" + bad + "y")).get<std::string>();
    EXPECT_EQ(back.front(), 'x');
    EXPECT_EQ(back.back(), 'y');
    EXPECT_NE(back.find("\xef\xbf\xbd"), std::string::npos);
  }
}

TEST(JsonOut, MicrosHaveThreeDecimals) {
  std::string out;
  {
    Sink sink(out);
    for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{1234567}, int64_t{-1500}, INT64_MAX,
                       INT64_MIN}) {
      sink.micros(ns);
      sink.ch(' ');
    }
  }
  EXPECT_EQ(out, "0.000 0.001 0.999 1.000 1234.567 -1.500 9223372036854775.807 -9223372036854775.808 ");
}

TEST(JsonOut, LongStringsAndPrettyLayout) {
  std::string big(100'000, 'x');
  big[70'000] = '"';
  EXPECT_EQ(nlohmann::json::parse(as_json_string(big)).get<std::string>(), big);
  std::string pretty;
  append_pretty(pretty, R"({"a":[1,{"b":"x,y:[z]"}],"c":{},"d":[]})");
  EXPECT_EQ(pretty,
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": \"x,y:[z]\"\n        }\n    ],\n"
            "    \"c\": {},\n    \"d\": []\n}");
}

}  // namespace
}  // namespace stepscope::json_out
