#include "stepscope/profiler/tfprof/view_text.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace stepscope::tfprof {
namespace {

// Writes the same three lines (a legend, then lines at depths 0, 1 and 2) into `text`.
void write_lines(ViewText& text) {
  text.lines() += "legend\n";
  text.lines() += "root\n";
  text.indent(2);
  text.lines() += "a\n";
  text.indent(4);
  text.lines() += "b\n";
}

TEST(ViewTextTest, WrittenAndDeferredIndentationReadTheSame) {
  ViewText written(ViewText::Indentation::kWritten), deferred(ViewText::Indentation::kDeferred);
  write_lines(written);
  write_lines(deferred);
  EXPECT_EQ(written.lines(), "legend\nroot\n  a\n    b\n");  // the spaces are in the lines
  EXPECT_EQ(deferred.lines(), "legend\nroot\na\nb\n");       // not yet
  EXPECT_EQ(written.str(), "legend\nroot\n  a\n    b\n");
  EXPECT_EQ(deferred.str(), "legend\nroot\n  a\n    b\n");
  EXPECT_EQ(&deferred.str(), &deferred.str());  // written once, then kept
}

TEST(ViewTextTest, IndentsBeforeTheSameLineAddUp) {
  ViewText text(ViewText::Indentation::kDeferred);
  text.indent(2);
  text.indent(3);
  text.indent(0);
  text.lines() += "x\n";
  EXPECT_EQ(text.str(), "     x\n");
}

TEST(ViewTextTest, AppendKeepsEachPartsIndentation) {
  for (auto first : {ViewText::Indentation::kWritten, ViewText::Indentation::kDeferred})
    for (auto second : {ViewText::Indentation::kWritten, ViewText::Indentation::kDeferred}) {
      ViewText a(first), b(second);
      write_lines(a);
      b.indent(6);
      b.lines() += "c\n";
      b.lines() += "d\n";
      a.append(std::move(b));
      a.indent(2);
      a.lines() += "e\n";
      EXPECT_EQ(a.str(), "legend\nroot\n  a\n    b\n      c\nd\n  e\n");
    }
}

// Deferred texts appended are moved in whole, parts of parts included, and read in order.
TEST(ViewTextTest, AppendedPartsOfPartsReadInOrder) {
  ViewText a(ViewText::Indentation::kDeferred), b(ViewText::Indentation::kDeferred),
      c(ViewText::Indentation::kDeferred);
  write_lines(a);
  b.indent(2);
  b.lines() += "b1\n";
  c.indent(4);
  c.lines() += "c1\n";
  c.lines() += "c2\n";
  b.append(std::move(c));
  EXPECT_EQ(c.str(), "");  // NOLINT(bugprone-use-after-move): its parts moved into b
  b.indent(6);
  b.lines() += "b2\n";  // after c's lines
  a.append(std::move(b));
  a.lines() += "a2\n";
  const ViewText copy = a;
  EXPECT_EQ(copy.str(), "legend\nroot\n  a\n    b\n  b1\n    c1\nc2\n      b2\na2\n");
  EXPECT_EQ(&a.str(), &copy.str());
}

TEST(ViewTextTest, AppendingATextReadAlreadyKeepsItsIndentation) {
  ViewText a(ViewText::Indentation::kDeferred), b(ViewText::Indentation::kDeferred);
  a.lines() += "a\n";
  b.indent(2);
  b.lines() += "b\n";
  EXPECT_EQ(b.str(), "  b\n");
  a.append(std::move(b));
  EXPECT_EQ(a.str(), "a\n  b\n");
}

TEST(ViewTextTest, AWholeTextAndAnEmptyOneReadAsGiven) {
  EXPECT_EQ(ViewText("already whole\n").str(), "already whole\n");
  EXPECT_EQ(ViewText().str(), "");
  ViewText moved(ViewText::Indentation::kDeferred);
  write_lines(moved);
  ViewText to(std::move(moved));
  EXPECT_EQ(moved.str(), "");  // NOLINT(bugprone-use-after-move): a moved-from text reads empty
  EXPECT_EQ(to.str(), "legend\nroot\n  a\n    b\n");
}

TEST(ViewTextTest, CopiesShareTheTextAndThreadsReadItOnce) {
  ViewText text(ViewText::Indentation::kDeferred);
  for (int i = 0; i < 1000; ++i) {
    text.indent(static_cast<size_t>(2 * (i % 7)));
    text.lines() += "line " + std::to_string(i) + "\n";
  }
  const ViewText copy = text;
  std::vector<const std::string*> seen(8);
  std::vector<std::thread> readers;
  for (size_t t = 0; t < seen.size(); ++t) readers.emplace_back([&, t] { seen[t] = &(t % 2 ? copy : text).str(); });
  for (auto& r : readers) r.join();
  for (const std::string* s : seen) EXPECT_EQ(s, seen[0]);
  std::string expected;
  for (int i = 0; i < 1000; ++i) expected += std::string(2 * (i % 7), ' ') + "line " + std::to_string(i) + "\n";
  EXPECT_EQ(*seen[0], expected);
}

}  // namespace
}  // namespace stepscope::tfprof
