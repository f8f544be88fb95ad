#include "stepscope/base/proto_message.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepscope {
namespace {

// Python's str() of the float widened to a double, as text_format prints a float field with
// float_format='' (tf.io.write_graph).
TEST(PythonFloatRepr, MatchesPython) {
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.5), "0.5");
  EXPECT_EQ(python_float_repr(-2.25), "-2.25");
  EXPECT_EQ(python_float_repr(123456.0), "123456.0");
  EXPECT_EQ(python_float_repr(static_cast<float>(0.1)), "0.10000000149011612");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(static_cast<float>(1e-5)), "9.999999747378752e-06");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_repr(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(python_float_repr(std::nan("")), "nan");
}

// Protobuf's CEscape: the named escapes, octal for every other byte outside printable ASCII.
TEST(ProtoTextEscape, EscapesLikeProtobuf) {
  EXPECT_EQ(proto_text_escape("plain text/0:1"), "plain text/0:1");
  EXPECT_EQ(proto_text_escape("a\"b'c\\d"), "a\\\"b\\'c\\\\d");
  EXPECT_EQ(proto_text_escape("\n\r\t"), "\\n\\r\\t");
  EXPECT_EQ(proto_text_escape(std::string("\0\x01\x7f", 3)), "\\000\\001\\177");
  EXPECT_EQ(proto_text_escape("\xc3\xa9"), "\\303\\251");  // é in UTF-8
}

TEST(ProtoMessage, WireAndTextOfTheSameMessage) {
  ProtoMessage shape;
  shape.add_message(2, "dim", std::move(ProtoMessage().add_int(1, "size", -1)));
  ProtoMessage m;
  m.add_string(1, "name", "w")
      .add_int(2, "count", 150)
      .add_bool(3, "on", true)
      .add_enum(4, "type", 1, "DT_FLOAT")
      .add_float(5, "f", 0.5f)
      .add_double(6, "d", 2.0)
      .add_message(7, "shape", std::move(shape))
      .add_packed_ints(8, "i", {1, 300})
      .add_packed_ints(9, "none", {})
      .add_message(10, "empty", ProtoMessage());
  const std::string expected_wire = std::string("\x0a\x01w", 3) +                      // name
                                    std::string("\x10\x96\x01", 3) +                   // count 150
                                    std::string("\x18\x01", 2) +                       // on
                                    std::string("\x20\x01", 2) +                       // type
                                    std::string("\x2d\x00\x00\x00\x3f", 5) +           // f 0.5
                                    std::string("\x31\0\0\0\0\0\0\0\x40", 9) +         // d 2.0
                                    std::string("\x3a\x0d\x12\x0b\x08", 5) +           // shape { dim { size:
                                    std::string(9, '\xff') + std::string("\x01", 1) +  //   -1 (ten bytes) } }
                                    std::string("\x42\x03\x01\xac\x02", 5) +           // i [1, 300] packed
                                    std::string("\x52\x00", 2);                        // empty {}
  EXPECT_EQ(m.serialize(), expected_wire);
  EXPECT_EQ(m.to_text(),
            "name: \"w\"\n"
            "count: 150\n"
            "on: true\n"
            "type: DT_FLOAT\n"
            "f: 0.5\n"
            "d: 2.0\n"
            "shape {\n"
            "  dim {\n"
            "    size: -1\n"
            "  }\n"
            "}\n"
            "i: 1\n"
            "i: 300\n"
            "empty {\n"
            "}\n");
}

}  // namespace
}  // namespace stepscope
