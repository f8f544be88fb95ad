// The input pipeline of TensorFlow 1.x's tf.data: a Dataset is an immutable value describing
// where elements come from (a CSV file, in-memory tensors, a range) and how they are
// transformed (shuffle, batch, repeat, map, take, skip); make_iterator(scope) puts it in a
// graph as an IteratorGetNext node whose outputs are the next element on every Session::run.
//
//   auto data = Dataset::csv("data/digits.csv.gz").shuffle(1797, /*seed=*/1).batch(64).repeat();
//   auto [x, y] = data.make_iterator(root).get_next();   // float32[?,64], int32[?]
//
// An element is a list of tensors ("components"); a CSV gives two, features and label. Each
// session iterates on its own; at the end of the data Session::run raises OutOfRangeError
// "End of sequence" (which ends a MonitoredSession's loop cleanly), and the iterator's
// initializer() starts it again.
//
// Files are read and parsed when Dataset::csv is called, once, into a table in memory that
// every pass and every session shares: errors in the file surface right there, with the file
// and line, and the element shapes are known when the graph is built.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/scope.h"

namespace stepscope {

class DatasetSource;
class Dataset;

namespace data_internal {
class DatasetImpl;
}

// tf.data's cardinality() answers.
inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

struct CsvOptions {
  // The column (0-based; negative counts from the end) that becomes the second component, the
  // label; every other column goes, in order, into the first, a vector of features.
  // std::nullopt: no label, elements have the features only.
  std::optional<int> label_column = -1;
  DType feature_dtype = DType::kFloat32;  // float32, float64, int32 or int64
  DType label_dtype = DType::kInt32;      // same choice
  int header_lines = 0;                   // lines skipped at the top of the file
  char delimiter = ',';
  // A gzip file may inflate to at most this many bytes (ResourceExhaustedError naming the file
  // and the limit beyond it): a small .gz can hold gigabytes. 1 GiB fits real data sets.
  uint64_t max_decompressed_bytes = uint64_t{1} << 30;
};

// What one element is made of: a dtype and a (possibly partial) shape per component.
struct ElementSpec {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
};

// The outputs of an iterator's IteratorGetNext node, one per component. Index it, loop over it,
// or unpack the common (features, label) pair: `auto [x, y] = iterator.get_next();` (unpacking
// is for two components; another count throws InvalidArgumentError).
class NextElement {
 public:
  NextElement() = default;
  explicit NextElement(std::vector<Output> outputs) : outputs_(std::move(outputs)) {}
  size_t size() const { return outputs_.size(); }
  Output operator[](size_t i) const { return outputs_.at(i); }
  auto begin() const { return outputs_.begin(); }
  auto end() const { return outputs_.end(); }
  const std::vector<Output>& outputs() const { return outputs_; }
  operator const std::vector<Output>&() const { return outputs_; }  // NOLINT: fetch lists

  template <size_t I>
  Output get() const {
    check_pair();
    return outputs_[I];
  }

 private:
  void check_pair() const;
  std::vector<Output> outputs_;
};

// A dataset placed in a graph: an IteratorGetNext node and its initializer (a MakeIterator node).
class Iterator {
 public:
  // The same outputs on every call: each run that fetches any of them takes one element.
  NextElement get_next() const { return NextElement(outputs_); }
  // Run it to start this session's pass over the data again (a pass also starts by itself on
  // the first get_next, so running it first is optional).
  Node* initializer() const { return initializer_; }
  // An initializer that switches this iterator to `dataset` (same dtypes, compatible shapes):
  // TF's reinitializable iterator, e.g. to evaluate on a test split with the same graph.
  Node* make_initializer(const Dataset& dataset, CallSite site = CallSite::current()) const;
  const ElementSpec& element_spec() const { return spec_; }

 private:
  friend class Dataset;
  Scope scope_;
  std::vector<Output> outputs_;
  Node* initializer_ = nullptr;
  ElementSpec spec_;
  explicit Iterator(const Scope& scope) : scope_(scope) {}
};

class Dataset {
 public:
  // Each CSV row is an element: (features, label) by default. The file may be plain or
  // gzip-compressed (detected from its content). Errors: NotFoundError naming a missing file,
  // DataLossError for corrupt or truncated gzip data, InvalidArgumentError for a malformed row,
  // naming the file and line ("data/x.csv:17: expected 65 fields, got 63"; columns in messages
  // count from 1). Blank lines are skipped; fields are numbers, optionally padded with spaces
  // (no quoting).
  static Dataset csv(const std::string& path, const CsvOptions& options = {});
  // MNIST-style IDX files (plain or gzip; see idx.h): each element is (image, label) with the
  // image flattened to a float32 vector of its pixels as stored (0..255 for MNIST: scale with
  // map() if wanted) and the label an int32, as Dataset::csv gives them. The labels file must
  // be a vector with one label per image (InvalidArgumentError naming both files otherwise).
  static Dataset from_idx(const std::string& images_path, const std::string& labels_path);
  // Slices each tensor along its first dimension (all must have the same size there): element i
  // is (components[0][i], components[1][i], ...). The tensors are copied.
  static Dataset from_tensor_slices(const std::vector<Tensor>& components);
  // One element made of the given tensors (TF's from_tensors; copied).
  static Dataset from_tensors(const std::vector<Tensor>& components);
  // int64 scalars start, start + step, ... up to but excluding stop.
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  static Dataset range(int64_t stop) { return range(0, stop); }

  // Elements in random order, drawn from a buffer of `buffer_size` elements (>= the dataset's
  // size for a uniform shuffle). With a seed the order is reproducible: every new pass (a new
  // session, an initializer run) replays the same sequence of orders, and with
  // reshuffle_each_iteration each repetition under a later repeat() gets a different one.
  // Without a seed, each pass draws a random one.
  Dataset shuffle(int64_t buffer_size, std::optional<uint64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  // Stacks `batch_size` consecutive elements (their shapes must match) into one with a new
  // first dimension. The last, smaller batch is kept unless drop_remainder; so that dimension is
  // static (batch_size) only with drop_remainder, unknown (-1) otherwise.
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // The dataset `count` times over (-1: forever). An empty dataset stays empty.
  Dataset repeat(int64_t count = -1) const;
  // Applies `fn` to every element. fn owns the tensors it gets (it may modify them in place)
  // and may be called from several threads at once (one per session). Its result must match
  // `output_spec`, by default the input's spec (dtypes equal, shapes compatible), else
  // IteratorGetNext fails with InvalidArgumentError.
  using MapFn = std::function<std::vector<Tensor>(std::vector<Tensor>)>;
  Dataset map(MapFn fn, std::optional<ElementSpec> output_spec = std::nullopt) const;
  // The first `count` elements (-1: all).
  Dataset take(int64_t count) const;
  // All but the first `count` elements (-1: none).
  Dataset skip(int64_t count) const;
  // Every num_shards-th element starting at `index` (element i is kept when i % num_shards ==
  // index), as tf.data's shard: each worker of a data-parallel job reads its own part
  // (Dataset::shard(dist::size(), dist::rank())). Shard before shuffle and batch, so the workers'
  // parts are disjoint and each batches its own.
  Dataset shard(int64_t num_shards, int64_t index) const;

  const ElementSpec& element_spec() const;
  const std::vector<DType>& output_types() const { return element_spec().dtypes; }
  const std::vector<Shape>& output_shapes() const { return element_spec().shapes; }
  // Elements in one pass: a count, kInfiniteCardinality or kUnknownCardinality.
  int64_t cardinality() const;
  // "csv(data/digits.csv.gz).shuffle(1797, seed=1).batch(64).repeat()"
  std::string describe() const;
  // True when every pass yields the same elements in the same order (no reshuffling).
  bool same_order_every_pass() const;

  // Adds this dataset's IteratorGetNext and MakeIterator nodes under `scope`.
  Iterator make_iterator(const Scope& scope, CallSite site = CallSite::current()) const;
  // The pipeline as the ops layer sees it (the IteratorGetNext node's "dataset" attribute).
  std::shared_ptr<const DatasetSource> source() const;

 private:
  explicit Dataset(std::shared_ptr<const data_internal::DatasetImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const data_internal::DatasetImpl> impl_;
};

// Splits a dataset into its first part and the rest (take / skip, like Keras's split_dataset,
// without shuffling): give exactly one of left_size (elements) or left_fraction (of the
// cardinality, rounded; needs a finite, known one). Deterministic because the dataset must
// yield the same order on every pass (InvalidArgumentError otherwise): split the source, then
// shuffle each part:
//   auto [train, test] = split_dataset(Dataset::csv(path), {.left_fraction = 0.8});
//   train = train.shuffle(2000, 1).batch(64).repeat();
struct SplitOptions {
  int64_t left_size = -1;
  double left_fraction = -1;
};
std::pair<Dataset, Dataset> split_dataset(const Dataset& dataset, const SplitOptions& options);

}  // namespace stepscope

template <>
struct std::tuple_size<stepscope::NextElement> : std::integral_constant<size_t, 2> {};
template <size_t I>
struct std::tuple_element<I, stepscope::NextElement> {
  using type = stepscope::Output;
};
