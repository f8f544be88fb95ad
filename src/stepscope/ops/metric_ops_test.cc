// The metric family's kernels on one batch: confusion counts at thresholds (weights, bool
// predictions, the boundary "positive is strictly above"), the AUC summation methods, and the
// errors naming what is wrong.
#include "stepscope/ops/metric_ops.h"

#include <gtest/gtest.h>

#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

TEST(ConfusionMatrixAtThresholds, CountsWeightsAboveAndAtMostEachThreshold) {
  Graph g;
  Scope root(g);
  auto labels = constant(root, std::vector<int32_t>{1, 0, 1, 0, 1}, Shape{5});
  auto preds = constant(root, std::vector<float>{0.9f, 0.8f, 0.5f, 0.2f, 0.1f}, Shape{5});
  auto weights = constant(root, std::vector<float>{1, 2, 3, 4, 5}, Shape{5});
  // 0.5 sits on a threshold: it is negative there (positive means strictly above).
  auto c = confusion_matrix_at_thresholds(root, labels, preds, {0.0f, 0.5f, 0.85f}, weights);
  auto out = eval({c.true_positives, c.false_negatives, c.true_negatives, c.false_positives});
  EXPECT_EQ(values(out[0]), (std::vector<float>{9, 1, 1}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{0, 8, 8}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{0, 4, 6}));
  EXPECT_EQ(values(out[3]), (std::vector<float>{6, 2, 0}));
}

TEST(ConfusionMatrixAtThresholds, BoolPredictionsAndDefaultWeights) {
  Graph g;
  Scope root(g);
  auto labels = constant(root, std::vector<bool>{true, false, true, false}, Shape{2, 2});
  auto preds = constant(root, std::vector<bool>{true, true, false, false}, Shape{2, 2});
  auto c = confusion_matrix_at_thresholds(root, labels, preds, {0.5f});
  auto out = eval({c.true_positives, c.false_negatives, c.true_negatives, c.false_positives});
  EXPECT_EQ(values(out[0]), std::vector<float>{1});
  EXPECT_EQ(values(out[1]), std::vector<float>{1});
  EXPECT_EQ(values(out[2]), std::vector<float>{1});
  EXPECT_EQ(values(out[3]), std::vector<float>{1});
}

TEST(ConfusionMatrixAtThresholds, BadInputsAreNamed) {
  Graph g;
  Scope root(g);
  auto labels = constant(root, std::vector<int32_t>{1, 0}, Shape{2});
  EXPECT_THROW(confusion_matrix_at_thresholds(root, labels, constant(root, std::vector<float>{0.1f}, Shape{1}), {0.5f}),
               InvalidArgumentError);
  EXPECT_THROW(confusion_matrix_at_thresholds(root, labels, constant(root, std::vector<float>{0.1f, 0.2f}, Shape{2}),
                                              {0.5f, 0.1f}),
               InvalidArgumentError);
  auto c =
      confusion_matrix_at_thresholds(root, labels, constant(root, std::vector<float>{0.1f, -0.5f}, Shape{2}), {0.5f});
  try {
    eval(c.true_positives);
    FAIL() << "a prediction of -0.5 must be rejected";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("-0.5"), std::string::npos) << e.what();
  }
}

TEST(AucFromConfusion, SummationMethods) {
  Graph g;
  Scope root(g);
  // An ROC curve through (1,1), (0.5,1), (0.5,0.5), (0,0): trapezoids give 0.625, the lower
  // step 0.5, the upper 0.75.
  ConfusionAtThresholds c{constant(root, std::vector<float>{2, 2, 1, 0}, Shape{4}),
                          constant(root, std::vector<float>{0, 0, 1, 2}, Shape{4}),
                          constant(root, std::vector<float>{0, 1, 1, 2}, Shape{4}),
                          constant(root, std::vector<float>{2, 1, 1, 0}, Shape{4})};
  EXPECT_NEAR(eval(auc_from_confusion(root, c, "ROC", "trapezoidal")).scalar_value<float>(), 0.625, 1e-5);
  EXPECT_NEAR(eval(auc_from_confusion(root, c, "ROC", "minoring")).scalar_value<float>(), 0.5, 1e-5);
  EXPECT_NEAR(eval(auc_from_confusion(root, c, "ROC", "majoring")).scalar_value<float>(), 0.75, 1e-5);
  const float pr = eval(auc_from_confusion(root, c, "PR", "careful_interpolation")).scalar_value<float>();
  EXPECT_GT(pr, 0.5f);
  EXPECT_LT(pr, 1.0f);
  EXPECT_THROW(auc_from_confusion(root, c, "ROC", "simpson"), InvalidArgumentError);
}

TEST(AssertSameShape, ForwardsOrNamesBothShapes) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1});
  auto y = placeholder(root, DType::kFloat32, Shape{-1});
  auto same = assert_same_shape(root, x, y, "predictions", "labels");
  EXPECT_EQ(
      eval(same, {{x, Tensor::from_vector<float>({1, 2})}, {y, Tensor::from_vector<float>({3, 4})}}).to_vector<float>(),
      (std::vector<float>{1, 2}));
  try {
    eval(same, {{x, Tensor::from_vector<float>({1, 2})}, {y, Tensor::from_vector<float>({3})}});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("predictions shape [2] and labels shape [1] are not the same"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stepscope
