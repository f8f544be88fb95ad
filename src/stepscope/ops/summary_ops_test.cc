#include "stepscope/ops/summary_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "stepscope/testing/error_text.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// tag -> simple_value of a serialized Summary scalar tensor, in order.
std::vector<std::pair<std::string, float>> values_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kString);
  EXPECT_EQ(t.shape(), Shape{});
  std::string why;
  std::optional<Summary> s = Summary::parse(t.data<std::string>()[0], &why);
  EXPECT_TRUE(s) << why;
  std::vector<std::pair<std::string, float>> out;
  if (s)
    for (const auto& v : s->value) {
      EXPECT_TRUE(v.simple_value) << v.tag;
      out.emplace_back(v.tag, v.simple_value.value_or(-12345.0f));
    }
  return out;
}

using testing::error_text;

using P = std::pair<std::string, float>;

TEST(ScalarSummary, SerializesOneSimpleValueNamedAfterTheTag) {
  Graph g;
  Scope root(g);
  Output loss = constant(root, 0.25f);
  Output s = scalar(root, "loss", loss);
  EXPECT_EQ(s.node->name(), "loss");
  EXPECT_EQ(s.node->op_type(), "ScalarSummary");
  EXPECT_EQ(s.node->input(0).node->name(), "loss/tags");
  EXPECT_EQ(s.dtype(), DType::kString);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_THAT(values_of(testing::eval(s)), ElementsAre(P{"loss", 0.25f}));
  // The exact bytes TensorFlow writes: Summary{value{tag "loss" simple_value 0.25}}.
  EXPECT_EQ(testing::eval(s).data<std::string>()[0], std::string("\x0A\x0B\x0A\x04loss\x15\x00\x00\x80\x3E", 13));
  EXPECT_THAT(g.collection(kSummariesCollection), ElementsAre(s.node));
}

TEST(ScalarSummary, TagsFollowNameScopesAndAreMadeUnique) {
  Graph g;
  Scope root(g);
  Scope train = root.with_name_scope("train");
  Output a = scalar(train, "loss", constant(root, 1.0f));
  Output b = scalar(train, "loss", constant(root, 2.0f));
  Output c = scalar(root, "loss", constant(root, 3.0f));
  EXPECT_EQ(a.node->name(), "train/loss");
  EXPECT_EQ(b.node->name(), "train/loss_1");
  EXPECT_EQ(c.node->name(), "loss");
  EXPECT_THAT(values_of(testing::eval(a)), ElementsAre(P{"train/loss", 1.0f}));
  EXPECT_THAT(values_of(testing::eval(b)), ElementsAre(P{"train/loss_1", 2.0f}));
  EXPECT_THAT(values_of(testing::eval(c)), ElementsAre(P{"loss", 3.0f}));
}

TEST(ScalarSummary, IllegalTagCharactersAreReplacedAsTensorFlowDoes) {
  Graph g;
  Scope root(g);
  Output s = scalar(root, "/acc (top-1):v2.x", constant(root, 0.5f));
  EXPECT_THAT(values_of(testing::eval(s)), ElementsAre(P{"acc__top-1__v2.x", 0.5f}));
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { scalar(root, "//", constant(root, 0.5f)); }),
              HasSubstr("summary name '//' is empty"));
}

TEST(ScalarSummary, NumericDtypesBecomeFloats) {
  Graph g;
  Scope root(g);
  Output d = scalar(root, "d", constant(root, 0.1));
  Output i = scalar(root, "i", constant(root, int32_t{-7}));
  Output l = scalar(root, "l", constant(root, int64_t{1} << 40));
  auto out = testing::eval({d, i, l});
  EXPECT_THAT(values_of(out[0]), ElementsAre(P{"d", 0.1f}));
  EXPECT_THAT(values_of(out[1]), ElementsAre(P{"i", -7.0f}));
  EXPECT_THAT(values_of(out[2]), ElementsAre(P{"l", 1099511627776.0f}));
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { scalar(root, "b", constant(root, true)); }),
              HasSubstr("[ScalarSummary] b: values must be float32, float64, int32 or int64, got bool"));
}

TEST(ScalarSummary, NonScalarValuesAreRejectedAtBuildTimeOrRunTime) {
  Graph g;
  Scope root(g);
  EXPECT_EQ(error_text<InvalidArgumentError>([&] {
              scalar(root, "v", constant(root, Tensor::from_vector<float>({1, 2})));
            }),
            "[ScalarSummary] v: tags and values not the same shape: [] != [2] (tag 'v')");
  // Unknown until run time: checked by the kernel with the same text.
  Output x = placeholder(root, DType::kFloat32);
  Output s = scalar(root, "w", x);
  EXPECT_THAT(values_of(testing::eval(s, {{x, Tensor::scalar(4.0f)}})), ElementsAre(P{"w", 4.0f}));
  EXPECT_EQ(error_text<InvalidArgumentError>([&] {
              testing::eval(s, {{x, Tensor::from_vector<float>({1, 2, 3})}});
            }),
            "[ScalarSummary] w: tags and values not the same shape: [] != [3] (tag 'w')");
}

TEST(ScalarSummary, NanAndInfinityAreWrittenAsIs) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root, DType::kFloat32, Shape{});
  Output s = scalar(root, "x", x);
  auto nan = values_of(testing::eval(s, {{x, Tensor::scalar(std::numeric_limits<float>::quiet_NaN())}}));
  ASSERT_EQ(nan.size(), 1u);
  EXPECT_TRUE(std::isnan(nan[0].second));
  EXPECT_THAT(values_of(testing::eval(s, {{x, Tensor::scalar(-std::numeric_limits<float>::infinity())}})),
              ElementsAre(P{"x", -std::numeric_limits<float>::infinity()}));
}

TEST(ScalarSummary, TheOpTakesATensorOfTagsOfTheValuesShape) {
  // The op itself (as tf.raw_ops.ScalarSummary) accepts matching tag and value tensors.
  Graph g;
  Scope root(g);
  Tensor tags(DType::kString, Shape{2});
  tags.data<std::string>()[0] = "p", tags.data<std::string>()[1] = "q";
  Node* n = root.add_node(op_def("ScalarSummary"),
                          {constant(root, tags), constant(root, Tensor::from_vector<float>({1.5f, 2.5f}))}, {},
                          CallSite::current());
  EXPECT_THAT(values_of(testing::eval(n->output(0))), ElementsAre(P{"p", 1.5f}, P{"q", 2.5f}));
  EXPECT_THAT(
      error_text<InvalidArgumentError>([&] {
        root.add_node(op_def("ScalarSummary"), {constant(root, tags), constant(root, 1.0f)}, {}, CallSite::current());
      }),
      HasSubstr("tags and values not the same shape: [2] != []"));
  EXPECT_THAT(
      error_text<InvalidArgumentError>([&] {
        root.add_node(op_def("ScalarSummary"), {constant(root, 1.0f), constant(root, 1.0f)}, {}, CallSite::current());
      }),
      HasSubstr("string"));
}

TEST(MergeSummary, ConcatenatesValuesInOrder) {
  Graph g;
  Scope root(g);
  Output a = scalar(root, "a", constant(root, 1.0f));
  Output b = scalar(root, "b", constant(root, 2.0f));
  Output m = merge_summary(root, {b, a});
  EXPECT_EQ(m.node->op_type(), "MergeSummary");
  EXPECT_EQ(m.node->name(), "MergeSummary");
  EXPECT_THAT(values_of(testing::eval(m)), ElementsAre(P{"b", 2.0f}, P{"a", 1.0f}));
  // Not added to the summaries collection unless asked.
  EXPECT_EQ(g.collection(kSummariesCollection).size(), 2u);
  Output m2 = merge_summary(root, {a}, {"mine"});
  EXPECT_THAT(g.collection("mine"), ElementsAre(m2.node));
}

TEST(MergeSummary, AcceptsStringTensorsOfAnyShape) {
  Graph g;
  Scope root(g);
  Tensor many(DType::kString, Shape{2, 1});
  many.data<std::string>()[0] = Summary{{Summary::scalar("x", 1.0f)}}.serialize();
  many.data<std::string>()[1] = Summary{{Summary::scalar("y", 2.0f), Summary::scalar("z", 3.0f)}}.serialize();
  Output m = merge_summary(root, {constant(root, many), scalar(root, "w", constant(root, 4.0f))});
  EXPECT_THAT(values_of(testing::eval(m)), ElementsAre(P{"x", 1.0f}, P{"y", 2.0f}, P{"z", 3.0f}, P{"w", 4.0f}));
}

TEST(MergeSummary, DuplicateTagsAndGarbageFailAtRunTime) {
  Graph g;
  Scope root(g);
  Output a = scalar(root, "a", constant(root, 1.0f));
  Output m = merge_summary(root, {a, a});
  EXPECT_EQ(error_text<InvalidArgumentError>([&] { testing::eval(m); }),
            "[MergeSummary] MergeSummary: Duplicate tag a found in summary inputs");
  Output junk = merge_summary(root, {constant(root, Tensor::scalar<std::string>("\x0A\x09"))});
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { testing::eval(junk); }),
              HasSubstr("Could not parse one of the summary inputs"));
  // Values without a tag are not checked for duplicates, as in TensorFlow.
  Tensor untagged = Tensor::scalar<std::string>(Summary{{Summary::scalar("", 1.0f)}}.serialize());
  Output ok = merge_summary(root, {constant(root, untagged), constant(root, untagged)});
  EXPECT_THAT(values_of(testing::eval(ok)), ElementsAre(P{"", 1.0f}, P{"", 1.0f}));
  EXPECT_THROW(merge_summary(root, {}), InvalidArgumentError);
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { merge_summary(root, {constant(root, 1.0f)}); }),
              HasSubstr("string"));
}

TEST(MergeAllSummaries, MergesTheSummariesCollectionOrReturnsNull) {
  Graph g;
  Scope root(g);
  EXPECT_FALSE(merge_all_summaries(g));
  Output x = placeholder(root, DType::kFloat32, Shape{});
  scalar(root, "x", x);
  scalar(root.with_name_scope("twice"), "x", mul(root, x, 2.0));
  scalar(root, "other", x, /*collections=*/{"elsewhere"});
  Output all = merge_all_summaries(g);
  ASSERT_TRUE(all);
  EXPECT_THAT(values_of(testing::eval(all, {{x, Tensor::scalar(3.0f)}})),
              ElementsAre(P{"x", 3.0f}, P{"twice/x", 6.0f}));
  Output other = merge_all_summaries(g, "elsewhere");
  EXPECT_THAT(values_of(testing::eval(other, {{x, Tensor::scalar(3.0f)}})), ElementsAre(P{"other", 3.0f}));
}

TEST(SummaryProto, RoundTripsEveryModelledFieldAndKeepsOthers) {
  Summary s;
  Summary::Value v = Summary::scalar("a", 1.0f);
  v.metadata = "meta";
  Summary::Value h;
  h.tag = "histo";
  h.other_fields = std::string("\x2A\x02\x09\x00", 4);  // field 5 (histo), kept verbatim
  s.value = {v, h, Summary::scalar("zero", 0.0f)};
  std::optional<Summary> back = Summary::parse(s.serialize());
  ASSERT_TRUE(back);
  ASSERT_EQ(back->value.size(), 3u);
  EXPECT_EQ(back->value[0].tag, "a");
  EXPECT_EQ(back->value[0].simple_value, 1.0f);
  EXPECT_EQ(back->value[0].metadata, "meta");
  EXPECT_EQ(back->value[1].tag, "histo");
  EXPECT_FALSE(back->value[1].simple_value);
  EXPECT_EQ(back->value[1].other_fields, h.other_fields);
  EXPECT_EQ(back->value[2].simple_value, 0.0f);  // a oneof member survives at its default
  EXPECT_EQ(back->serialize(), s.serialize());
  std::string why;
  EXPECT_FALSE(Summary::parse("\x0A\x03\x15\x00", &why));
  EXPECT_THAT(why, HasSubstr("Summary"));
}

}  // namespace
}  // namespace stepscope
