#include "stepscope/profiler/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace stepscope {
namespace {

// The process's modules, reported once (and again when an address falls outside all of them:
// a library loaded since).
class Symbolizer {
 public:
  ~Symbolizer() {
    if (dwfl_) dwfl_end(dwfl_);
  }

  // The frames at a return address, innermost first: the functions inlined there, then the
  // function the address is in.
  std::vector<SourceLocation> lookup(uintptr_t return_address) {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(return_address);
    if (it != cache_.end()) return it->second;
    std::vector<SourceLocation> frames = resolve(return_address);
    cache_.emplace(return_address, frames);
    return frames;
  }

 private:
  bool report() {
    if (dwfl_) dwfl_end(dwfl_);
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = nullptr,
        .debuginfo_path = &debuginfo_path,
    };
    dwfl_ = dwfl_begin(&callbacks);
    if (!dwfl_) return false;
    if (dwfl_linux_proc_report(dwfl_, getpid()) != 0 || dwfl_report_end(dwfl_, nullptr, nullptr) != 0) {
      dwfl_end(dwfl_);
      dwfl_ = nullptr;
      return false;
    }
    return true;
  }

  std::vector<SourceLocation> resolve(uintptr_t return_address) {
    SourceLocation frame;
    if (return_address == 0) return {frame};
    // The call instruction, not the one after it (which may belong to the next line).
    const Dwarf_Addr pc = return_address - 1;
    if (!dwfl_ && (tried_ || !report())) {
      tried_ = true;
      return {frame};
    }
    tried_ = true;
    Dwfl_Module* module = dwfl_addrmodule(dwfl_, pc);
    if (!module && !rereported_) {
      rereported_ = true;
      if (report()) module = dwfl_addrmodule(dwfl_, pc);
    }
    if (!module) return {frame};
    if (const char* symbol = dwfl_module_addrname(module, pc)) frame.function = demangle(symbol);
    std::vector<SourceLocation> frames;
    Dwarf_Die cu_storage;
    Dwarf_Addr bias = 0;
    if (Dwarf_Die* cu = find_cu(module, pc, &bias, &cu_storage)) {
      int number = 0;
      Dwarf_Line* line = dwarf_getsrc_die(cu, pc - bias);
      const char* file = line ? dwarf_linesrc(line, nullptr, nullptr) : nullptr;
      if (file && dwarf_lineno(line, &number) == 0) {
        frame.file = file;
        frame.line = number;
        add_inlined(cu, pc - bias, frame, frames);
      }
    }
    frames.push_back(std::move(frame));
    return frames;
  }

  // The compilation unit holding `pc`: by the address ranges table, else (clang emits none
  // unless -gdwarf-aranges) by each unit's own ranges.
  static Dwarf_Die* find_cu(Dwfl_Module* module, Dwarf_Addr pc, Dwarf_Addr* bias, Dwarf_Die* storage) {
    if (Dwarf_Die* cu = dwfl_module_addrdie(module, pc, bias)) return cu;
    Dwarf* dwarf = dwfl_module_getdwarf(module, bias);
    if (!dwarf) return nullptr;
    Dwarf_CU* unit = nullptr;
    while (dwarf_get_units(dwarf, unit, &unit, nullptr, nullptr, storage, nullptr) == 0)
      if (dwarf_haspc(storage, pc - *bias) == 1) return storage;
    return nullptr;
  }

  // The functions inlined at `pc` (DW_TAG_inlined_subroutine scopes, innermost first): each gets
  // the line being executed in it, and the line it was called from goes to the next one out;
  // `outer` (the real function) ends with the line of the outermost inlined call.
  static void add_inlined(Dwarf_Die* cu, Dwarf_Addr pc, SourceLocation& outer, std::vector<SourceLocation>& out) {
    Dwarf_Die* scopes = nullptr;
    const int n = dwarf_getscopes(cu, pc, &scopes);
    if (n <= 0) return;
    Dwarf_Files* files = nullptr;
    size_t num_files = 0;
    if (dwarf_getsrcfiles(cu, &files, &num_files) != 0) files = nullptr;
    std::string file = outer.file;
    int line = outer.line;
    for (int i = 0; i < n; ++i) {
      Dwarf_Die* scope = &scopes[i];
      if (dwarf_tag(scope) == DW_TAG_subprogram) break;
      if (dwarf_tag(scope) != DW_TAG_inlined_subroutine) continue;
      out.push_back({file, line, die_function(scope)});
      Dwarf_Attribute attr;
      Dwarf_Word call_file = 0, call_line = 0;
      const char* name = nullptr;
      if (files && dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &attr), &call_file) == 0 && call_file < num_files)
        name = dwarf_filesrc(files, call_file, nullptr, nullptr);
      dwarf_formudata(dwarf_attr(scope, DW_AT_call_line, &attr), &call_line);
      file = name ? name : "";
      line = static_cast<int>(call_line);
    }
    std::free(scopes);
    outer.file = file;
    outer.line = line;
  }

  // An inlined function's name: its linkage name demangled (the full signature), else its name.
  static std::string die_function(Dwarf_Die* die) {
    Dwarf_Attribute attr;
    for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name})
      if (const char* linkage = dwarf_formstring(dwarf_attr_integrate(die, at, &attr))) return demangle(linkage);
    const char* name = dwarf_diename(die);
    return name ? name : "";
  }

  static std::string demangle(const char* symbol) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
    std::string out = status == 0 && demangled ? demangled : symbol;
    std::free(demangled);
    return out;
  }

  std::mutex mutex_;
  Dwfl* dwfl_ = nullptr;
  bool tried_ = false;
  bool rereported_ = false;
  std::unordered_map<uintptr_t, std::vector<SourceLocation>> cache_;
};

Symbolizer& symbolizer() {
  static Symbolizer* s = new Symbolizer;  // never destroyed: frames may be symbolised at exit
  return *s;
}

// A file of stepscope's library: its sources ("<anything>/src/stepscope/<layer>/...", however
// the build spelled the path: absolute, or relative with ccache's base_dir) and installed headers.
bool is_library_file(std::string_view file) {
  for (std::string_view marker : {"src/stepscope/", "include/stepscope/"}) {
    const size_t at = file.rfind(marker);
    if (at == std::string_view::npos || (at > 0 && file[at - 1] != '/')) continue;
    const std::string_view rest = file.substr(at + marker.size());
    for (std::string_view layer : {"base/", "core/", "graph/", "ops/", "autodiff/", "runtime/", "train/", "hooks/",
                                   "profiler/", "dist/", "tools/"})
      if (rest.starts_with(layer)) return true;
  }
  return false;
}

enum class Kind { kUser, kLibrary, kNeutral };

Kind kind_of(const SourceLocation& f) {
  if (!f.file.empty()) {
    const std::string_view file = f.file;
    // Tests and test helpers beside the library's sources are its users.
    if (file.ends_with("_test.cc") || file.ends_with("_test_util.h") || file.find("/testing/") != file.npos)
      return Kind::kUser;
    if (is_library_file(file)) return Kind::kLibrary;
    if (file.starts_with("/usr/include/") || file.find("/c++/") != file.npos) return Kind::kNeutral;
    return Kind::kUser;
  }
  const std::string_view fn = f.function;
  if (fn.starts_with("stepscope::")) return Kind::kLibrary;
  if (fn.empty() || fn.starts_with("std::") || fn.starts_with("__gnu_cxx::")) return Kind::kNeutral;
  return Kind::kUser;
}

}  // namespace

std::vector<SourceLocation> symbolize_address(uintptr_t return_address) { return symbolizer().lookup(return_address); }

std::vector<SourceLocation> user_call_stack(std::span<const uintptr_t> return_addresses, const SourceLocation& site) {
  std::vector<SourceLocation> frames;  // innermost first
  frames.reserve(return_addresses.size());
  for (uintptr_t pc : return_addresses)
    for (SourceLocation& f : symbolize_address(pc)) frames.push_back(std::move(f));
  // What runs before main (the C library's start) is not the user's.
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].function == "main") {
      frames.resize(i + 1);
      break;
    }
  // The innermost user frame: the one of the function the call site names (found by name, so
  // without debug info too), else the innermost frame outside the library.
  const bool site_is_users = !site.file.empty() && kind_of(site) == Kind::kUser;
  const std::string site_function = site_is_users ? bare_function_name(site.function) : std::string();
  size_t user = frames.size();
  if (site_is_users)
    for (size_t i = 0; i < frames.size() && user == frames.size(); ++i)
      if ((frames[i].file.empty() || kind_of(frames[i]) == Kind::kUser) &&
          bare_function_name(frames[i].function) == site_function)
        user = i;
  if (user == frames.size()) {
    user = 0;
    while (user < frames.size() && kind_of(frames[user]) != Kind::kUser) ++user;
  }
  if (user == frames.size()) return {};

  std::vector<SourceLocation> out;  // outermost first
  for (size_t i = frames.size(); i-- > user + 1;)
    if (!frames[i].function.empty() || !frames[i].file.empty()) out.push_back(std::move(frames[i]));
  SourceLocation innermost = std::move(frames[user]);
  if (site_is_users && site_function == bare_function_name(innermost.function)) {
    innermost.file = site.file;
    innermost.line = site.line;
    out.push_back(std::move(innermost));
  } else {
    out.push_back(std::move(innermost));
    // The function that made the call was inlined into the frame found: the call's own frame.
    if (site_is_users) out.push_back(site);
  }
  if (user > 0 && kind_of(frames[user - 1]) == Kind::kLibrary) out.push_back(std::move(frames[user - 1]));
  return out;
}

std::string bare_function_name(std::string_view f) {
  if (f.find("<lambda") != std::string_view::npos || f.find("{lambda") != std::string_view::npos) return "<lambda>";
  // The parameter list: the first '(' that does not open "(anonymous namespace)".
  size_t paren = 0;
  for (;;) {
    paren = f.find('(', paren);
    if (paren == std::string_view::npos || f.substr(paren).rfind("(anonymous", 0) != 0) break;
    ++paren;
  }
  std::string_view head = f.substr(0, paren);
  int depth = 0;  // skip template arguments when looking for the last "::" or ' '
  size_t begin = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '<')
      ++depth;
    else if (c == '>')
      --depth;
    else if (depth == 0 && (c == ' ' || (c == ':' && i + 1 < head.size() && head[i + 1] == ':')))
      begin = i + 1;
  }
  head = head.substr(begin);
  while (!head.empty() && head.front() == ':') head.remove_prefix(1);
  return head.empty() ? std::string(f) : std::string(head);
}

}  // namespace stepscope
