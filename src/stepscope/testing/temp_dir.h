// A fresh, empty directory for one test, removed with everything in it when the object goes away.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stepscope::testing {

class TempDir {
 public:
  // Under the system temp dir, named after the running test ("stepscope_<suite>_<test>_XXXXXX").
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  std::string operator/(std::string_view name) const { return file(name); }
  // The names of the directory's entries, sorted.
  std::vector<std::string> entries() const;

 private:
  std::string path_;
};

}  // namespace stepscope::testing
