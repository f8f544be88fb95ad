#include "stepscope/train/dataset.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string_view>
#include <unordered_map>

#include "stepscope/ops/data_ops.h"
#include "stepscope/train/csv.h"
#include "stepscope/train/idx.h"

namespace stepscope {
namespace data_internal {

// State shared by the iterators of one pass (one IteratorGetNext in one session, or one
// initializer run): how many passes each shuffle has made so far, so a shuffle under repeat()
// reshuffles per repetition while the whole pass stays a pure function of the seeds.
struct PassContext {
  std::unordered_map<const void*, uint64_t> shuffles;
  uint64_t random_base = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
};
using Context = std::shared_ptr<PassContext>;

// In-memory columns (from_tensor_slices, a parsed CSV file); element i is row i of each.
struct Table {
  std::vector<Tensor> columns;
  std::vector<Shape> row_shapes;
  std::vector<int64_t> row_elements;
  int64_t rows = 0;

  // Copies row `row` of column c into row `dst_row` of dst.
  void copy_row(int64_t row, size_t c, Tensor& dst, int64_t dst_row) const {
    const Tensor& src = columns[c];
    const int64_t n = row_elements[c];
    if (src.dtype() == DType::kString) {
      const std::string* s = src.data<std::string>() + row * n;
      std::copy(s, s + n, dst.data<std::string>() + dst_row * n);
      return;
    }
    const size_t bytes = static_cast<size_t>(n) * dtype_size(src.dtype());
    std::memcpy(static_cast<char*>(dst.raw_data()) + dst_row * bytes,
                static_cast<const char*>(src.raw_data()) + row * bytes, bytes);
  }
  void materialize(int64_t row, std::vector<Tensor>& out) const {
    out.resize(columns.size());
    for (size_t c = 0; c < columns.size(); ++c) {
      out[c] = Tensor(columns[c].dtype(), row_shapes[c]);
      copy_row(row, c, out[c], 0);
    }
  }
};

// An element that is a row of a Table, not yet copied out of it.
struct RowRef {
  const Table* table = nullptr;
  int64_t row = 0;
};

// The iterators of this file. Pipelines whose elements are rows of a table (a table source under
// shuffle, repeat, take, skip) also hand elements out as RowRefs: batch() then gathers rows
// straight into the batch, and shuffle() buffers RowRefs, so no tensor is made per element.
class ElementIterator : public DatasetIterator {
 public:
  explicit ElementIterator(bool row_access) : row_access_(row_access) {}
  // Only when row_access: the next element as a row reference.
  virtual bool next_row(RowRef& out) {
    STEPSCOPE_CHECK(false && "next_row without row access");
    return false;
  }
  int64_t skip(int64_t n) override {
    if (!row_access_) return DatasetIterator::skip(n);
    RowRef r;
    int64_t dropped = 0;
    while ((n < 0 || dropped < n) && next_row(r)) ++dropped;
    return dropped;
  }
  bool row_access() const { return row_access_; }

 protected:
  // get_next of an iterator that pulls rows: materializes the row it gets.
  bool get_next_from_rows(std::vector<Tensor>& out) {
    RowRef r;
    if (!next_row(r)) return false;
    r.table->materialize(r.row, out);
    return true;
  }

 private:
  bool row_access_;
};

class DatasetImpl : public DatasetSource, public std::enable_shared_from_this<DatasetImpl> {
 public:
  DatasetImpl(ElementSpec spec, int64_t cardinality, std::string description, bool same_order, bool row_access)
      : spec_(std::move(spec)),
        cardinality_(cardinality),
        description_(std::move(description)),
        same_order_(same_order),
        row_access_(row_access) {}

  std::unique_ptr<DatasetIterator> make_iterator() const override {
    return make_iterator(std::make_shared<PassContext>());
  }
  // Iterators keep their dataset (and so everything upstream, tables included) alive. Each
  // stage's iterator is wrapped so that traced runs time it (InputStageTimer).
  std::unique_ptr<ElementIterator> make_iterator(const Context& ctx) const;

  const std::vector<DType>& output_dtypes() const override { return spec_.dtypes; }
  const std::vector<Shape>& output_shapes() const override { return spec_.shapes; }
  std::string describe() const override { return description_; }
  const ElementSpec& spec() const { return spec_; }
  int64_t cardinality() const { return cardinality_; }
  bool same_order() const { return same_order_; }
  bool row_access() const { return row_access_; }
  // The stage's name in RunMetadata::input_stages: the method that made it ("batch", "csv").
  const std::string& stage() const { return stage_; }

 protected:
  virtual std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const = 0;

  template <typename Self>
  std::shared_ptr<const Self> self() const {
    return std::static_pointer_cast<const Self>(shared_from_this());
  }

 private:
  ElementSpec spec_;
  int64_t cardinality_;
  std::string description_;
  bool same_order_;
  bool row_access_;
  std::string stage_ = stage_name(description_);

  // The last call of a description: "csv(x.csv).batch(64)" -> "batch", "range(0, 5)" -> "range".
  static std::string stage_name(const std::string& description) {
    size_t begin = 0;
    int depth = 0;
    for (size_t i = 0; i < description.size(); ++i) {
      if (description[i] == '(') ++depth;
      if (description[i] == ')') --depth;
      if (depth == 0 && description[i] == '.' && i > 0 && description[i - 1] == ')') begin = i + 1;
    }
    const size_t open = description.find('(', begin);
    return description.substr(begin, open == std::string::npos ? std::string::npos : open - begin);
  }
};

// A stage's iterator, timed while a traced run pulls an element (see InputStageTimer).
class TimedStage : public ElementIterator {
 public:
  TimedStage(const std::string& stage, std::unique_ptr<ElementIterator> inner)
      : ElementIterator(inner->row_access()), stage_(stage), inner_(std::move(inner)) {}
  bool get_next(std::vector<Tensor>& out) override {
    const InputStageTimer timer(stage_);
    return inner_->get_next(out);
  }
  bool next_row(RowRef& out) override {
    const InputStageTimer timer(stage_);
    return inner_->next_row(out);
  }
  int64_t skip(int64_t n) override {
    const InputStageTimer timer(stage_);
    return inner_->skip(n);
  }

 private:
  std::string stage_;
  std::unique_ptr<ElementIterator> inner_;
};

inline std::unique_ptr<ElementIterator> DatasetImpl::make_iterator(const Context& ctx) const {
  return std::make_unique<TimedStage>(stage_, make_stage_iterator(ctx));
}

using ImplPtr = std::shared_ptr<const DatasetImpl>;

}  // namespace data_internal

namespace {

using data_internal::Context;
using data_internal::DatasetImpl;
using data_internal::ElementIterator;
using data_internal::ImplPtr;
using data_internal::RowRef;
using data_internal::Table;

Shape prepend_dim(int64_t d, const Shape& s, const char* what) {
  if (!s.known_rank()) return Shape::unknown_rank();
  if (s.rank() >= Shape::kMaxRank)
    throw InvalidArgumentError(std::string(what) + ": element rank " + std::to_string(s.rank()) +
                               " leaves no room for another dimension (at most " + std::to_string(Shape::kMaxRank) +
                               ")");
  Shape out{d};
  for (int64_t x : s.dims()) out.add_dim(x);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sources

class SlicesDataset : public DatasetImpl {
 public:
  SlicesDataset(std::vector<Tensor> columns, std::string description)
      : DatasetImpl(spec_of(columns), columns.front().dim(0), std::move(description), true, true) {
    table_.rows = columns.front().dim(0);
    for (const Tensor& c : columns) {
      table_.row_shapes.push_back(Shape(c.shape().dims().subspan(1)));
      table_.row_elements.push_back(table_.row_shapes.back().num_elements());
    }
    table_.columns = std::move(columns);
  }

  static ElementSpec spec_of(const std::vector<Tensor>& columns) {
    ElementSpec spec;
    for (const Tensor& c : columns) {
      spec.dtypes.push_back(c.dtype());
      spec.shapes.push_back(Shape(c.shape().dims().subspan(1)));
    }
    return spec;
  }

  struct It : ElementIterator {
    std::shared_ptr<const SlicesDataset> d;
    int64_t row = 0;
    It() : ElementIterator(true) {}
    bool next_row(RowRef& out) override {
      if (row >= d->table_.rows) return false;
      out = {&d->table_, row++};
      return true;
    }
    bool get_next(std::vector<Tensor>& out) override { return get_next_from_rows(out); }
    int64_t skip(int64_t n) override {
      const int64_t left = d->table_.rows - row;
      const int64_t k = n < 0 ? left : std::min(n, left);
      row += k;
      return k;
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context&) const override {
    auto it = std::make_unique<It>();
    it->d = self<SlicesDataset>();
    return it;
  }

 private:
  Table table_;
};

class RangeDataset : public DatasetImpl {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step, std::string description)
      : DatasetImpl({{DType::kInt64}, {Shape{}}}, count(start, stop, step), std::move(description), true, false),
        start_(start),
        step_(step) {}

  static int64_t count(int64_t start, int64_t stop, int64_t step) {
    if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
    return start > stop ? (start - stop - step - 1) / -step : 0;
  }

  struct It : ElementIterator {
    int64_t next, step, left;
    It() : ElementIterator(false) {}
    bool get_next(std::vector<Tensor>& out) override {
      if (left <= 0) return false;
      out.assign(1, Tensor::scalar<int64_t>(next));
      next += step, --left;
      return true;
    }
    int64_t skip(int64_t n) override {
      const int64_t k = n < 0 ? left : std::min(n, left);
      next += k * step, left -= k;
      return k;
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context&) const override {
    auto it = std::make_unique<It>();
    it->next = start_, it->step = step_, it->left = cardinality();
    return it;
  }

 private:
  int64_t start_, step_;
};

// ---------------------------------------------------------------------------------------------
// Transformations

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class ShuffleDataset : public DatasetImpl {
 public:
  ShuffleDataset(ImplPtr input, int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle)
      : DatasetImpl(input->spec(), input->cardinality(),
                    input->describe() + ".shuffle(" + std::to_string(buffer_size) +
                        (seed ? ", seed=" + std::to_string(*seed) : std::string()) +
                        (reshuffle ? "" : ", reshuffle_each_iteration=false") + ")",
                    !reshuffle && seed && input->same_order(), input->row_access()),
        input_(std::move(input)),
        buffer_size_(buffer_size),
        seed_(seed),
        reshuffle_(reshuffle) {}

  struct It : ElementIterator {
    std::shared_ptr<const ShuffleDataset> d;
    std::unique_ptr<ElementIterator> input;
    std::mt19937_64 rng;
    std::vector<std::vector<Tensor>> elements;  // the buffer, without row access
    std::vector<RowRef> rows;                   // the buffer, with row access
    bool filled = false, input_done = false;
    explicit It(bool rows) : ElementIterator(rows) {}

    // TF's algorithm: fill the buffer, then hand out a random slot and refill it from the input.
    template <typename T, typename Pull>
    bool next_from(std::vector<T>& buffer, Pull&& pull, T& out) {
      if (!filled) {
        filled = true;
        buffer.reserve(static_cast<size_t>(std::min<int64_t>(d->buffer_size_, 1 << 16)));
        T e;
        while (static_cast<int64_t>(buffer.size()) < d->buffer_size_ && pull(e)) buffer.push_back(std::move(e));
        input_done = static_cast<int64_t>(buffer.size()) < d->buffer_size_;
      }
      if (buffer.empty()) return false;
      // Multiply-shift rather than std::uniform_int_distribution: the same order with every
      // standard library.
      const size_t j = static_cast<size_t>((static_cast<unsigned __int128>(rng()) * buffer.size()) >> 64);
      out = std::move(buffer[j]);
      if (!input_done && pull(buffer[j])) return true;
      input_done = true;
      buffer[j] = std::move(buffer.back());
      buffer.pop_back();
      return true;
    }
    bool next_row(RowRef& out) override {
      return next_from(
          rows, [&](RowRef& r) { return input->next_row(r); }, out);
    }
    bool get_next(std::vector<Tensor>& out) override {
      if (row_access()) return get_next_from_rows(out);
      return next_from(
          elements, [&](std::vector<Tensor>& e) { return input->get_next(e); }, out);
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    // The n-th pass of this shuffle within one pass of the whole pipeline gets its own order.
    const uint64_t pass = reshuffle_ ? ctx->shuffles[this]++ : 0;
    const uint64_t seed = seed_ ? *seed_ : ctx->random_base ^ reinterpret_cast<uintptr_t>(this);
    auto it = std::make_unique<It>(row_access());
    it->d = self<ShuffleDataset>();
    it->input = input_->make_iterator(ctx);
    it->rng.seed(splitmix64(splitmix64(seed) ^ pass));
    return it;
  }

 private:
  ImplPtr input_;
  int64_t buffer_size_;
  std::optional<uint64_t> seed_;
  bool reshuffle_;
};

ElementSpec batched_spec(const ElementSpec& in, int64_t batch_size, bool drop_remainder) {
  ElementSpec out{in.dtypes, {}};
  for (const Shape& s : in.shapes) out.shapes.push_back(prepend_dim(drop_remainder ? batch_size : -1, s, "batch"));
  return out;
}

int64_t batched_cardinality(int64_t n, int64_t batch_size, bool drop_remainder) {
  if (n < 0) return n;
  return drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
}

class BatchDataset : public DatasetImpl {
 public:
  BatchDataset(ImplPtr input, int64_t batch_size, bool drop_remainder)
      : DatasetImpl(batched_spec(input->spec(), batch_size, drop_remainder),
                    batched_cardinality(input->cardinality(), batch_size, drop_remainder),
                    input->describe() + ".batch(" + std::to_string(batch_size) +
                        (drop_remainder ? ", drop_remainder=true" : "") + ")",
                    input->same_order(), false),
        input_(std::move(input)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder) {}

  struct It : ElementIterator {
    std::shared_ptr<const BatchDataset> d;
    std::unique_ptr<ElementIterator> input;
    std::vector<RowRef> rows;                   // reused from batch to batch
    std::vector<std::vector<Tensor>> elements;  // same, without row access
    It() : ElementIterator(false) {}

    // Pulls up to batch_size elements into `buffer`; returns how many, 0 when there is no batch.
    template <typename T, typename Pull>
    int64_t collect(std::vector<T>& buffer, Pull&& pull) {
      const int64_t n = d->batch_size_;
      int64_t k = 0;
      for (; k < n; ++k) {
        if (static_cast<size_t>(k) == buffer.size()) buffer.emplace_back();
        if (!pull(buffer[k])) break;
      }
      return k == 0 || (d->drop_remainder_ && k < n) ? 0 : k;
    }
    bool get_next(std::vector<Tensor>& out) override {
      if (input->row_access()) {
        const int64_t k = collect(rows, [&](RowRef& r) { return input->next_row(r); });
        if (k == 0) return false;
        const Table& first = *rows[0].table;
        for (int64_t i = 1; i < k; ++i)  // one table upstream today; rows must at least be alike
          STEPSCOPE_CHECK(rows[i].table == &first || rows[i].table->row_elements == first.row_elements);
        out.resize(first.columns.size());
        for (size_t c = 0; c < out.size(); ++c) {
          out[c] = Tensor(first.columns[c].dtype(), prepend_dim(k, first.row_shapes[c], "batch"));
          for (int64_t i = 0; i < k; ++i) rows[i].table->copy_row(rows[i].row, c, out[c], i);
        }
        return true;
      }
      const int64_t k = collect(elements, [&](std::vector<Tensor>& e) { return input->get_next(e); });
      if (k == 0) return false;
      out.resize(elements[0].size());
      for (size_t c = 0; c < out.size(); ++c) {
        const Tensor& first = elements[0][c];
        for (int64_t i = 1; i < k; ++i)
          if (elements[i][c].shape() != first.shape())
            throw InvalidArgumentError("Cannot batch tensors with different shapes in component " + std::to_string(c) +
                                       ". First element had shape " + first.shape().to_string() + " and element " +
                                       std::to_string(i) + " had shape " + elements[i][c].shape().to_string() + ".");
        out[c] = Tensor(first.dtype(), prepend_dim(k, first.shape(), "batch"));
        const size_t bytes = static_cast<size_t>(first.bytes());
        for (int64_t i = 0; i < k; ++i) {
          if (first.dtype() == DType::kString) {
            auto src = elements[i][c].flat<std::string>();
            std::copy(src.begin(), src.end(), out[c].data<std::string>() + i * first.num_elements());
          } else {
            std::memcpy(static_cast<char*>(out[c].raw_data()) + i * bytes, elements[i][c].raw_data(), bytes);
          }
        }
      }
      for (int64_t i = 0; i < k; ++i) elements[i].clear();  // frees the elements now
      return true;
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    auto it = std::make_unique<It>();
    it->d = self<BatchDataset>();
    it->input = input_->make_iterator(ctx);
    return it;
  }

 private:
  ImplPtr input_;
  int64_t batch_size_;
  bool drop_remainder_;
};

int64_t repeated_cardinality(int64_t n, int64_t count) {
  if (count == 0 || n == 0) return 0;
  if (count < 0) return n == kUnknownCardinality ? n : kInfiniteCardinality;
  return n < 0 ? n : n * count;
}

class RepeatDataset : public DatasetImpl {
 public:
  RepeatDataset(ImplPtr input, int64_t count)
      : DatasetImpl(input->spec(), repeated_cardinality(input->cardinality(), count),
                    input->describe() + ".repeat(" + (count < 0 ? std::string() : std::to_string(count)) + ")",
                    input->same_order(), input->row_access()),
        input_(std::move(input)),
        count_(count) {}

  struct It : ElementIterator {
    std::shared_ptr<const RepeatDataset> d;
    Context ctx;
    std::unique_ptr<ElementIterator> input;
    int64_t epochs = 0;
    bool got_one = false;  // in the current epoch
    explicit It(bool rows) : ElementIterator(rows) {}

    template <typename Pull>
    bool next(Pull&& pull) {
      for (;;) {
        if (!input) {
          if (d->count_ >= 0 && epochs >= d->count_) return false;
          input = d->input_->make_iterator(ctx);
          got_one = false;
        }
        if (pull()) return got_one = true;
        input.reset();
        ++epochs;
        if (!got_one) {  // an empty input would loop forever
          epochs = d->count_ < 0 ? 0 : d->count_;
          return false;
        }
      }
    }
    bool next_row(RowRef& r) override {
      return next([&] { return input->next_row(r); });
    }
    bool get_next(std::vector<Tensor>& out) override {
      return next([&] { return input->get_next(out); });
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    auto it = std::make_unique<It>(row_access());
    it->d = self<RepeatDataset>();
    it->ctx = ctx;
    return it;
  }

 private:
  ImplPtr input_;
  int64_t count_;
};

class MapDataset : public DatasetImpl {
 public:
  MapDataset(ImplPtr input, Dataset::MapFn fn, ElementSpec spec)
      : DatasetImpl(std::move(spec), input->cardinality(), input->describe() + ".map()", input->same_order(), false),
        input_(std::move(input)),
        fn_(std::move(fn)) {}

  struct It : ElementIterator {
    std::shared_ptr<const MapDataset> d;
    std::unique_ptr<ElementIterator> input;
    std::vector<Tensor> in;
    It() : ElementIterator(false) {}
    bool get_next(std::vector<Tensor>& out) override {
      if (!input->get_next(in)) return false;
      out = d->fn_(std::move(in));
      in.clear();
      const ElementSpec& spec = d->spec();
      if (out.size() != spec.dtypes.size())
        throw InvalidArgumentError("map function returned " + std::to_string(out.size()) + " components, expected " +
                                   std::to_string(spec.dtypes.size()) + " (pass the output spec to map())");
      for (size_t c = 0; c < out.size(); ++c)
        if (!out[c].initialized() || out[c].dtype() != spec.dtypes[c] ||
            !out[c].shape().compatible_with(spec.shapes[c]))
          throw InvalidArgumentError(
              "map function returned " +
              (out[c].initialized() ? std::string(dtype_name(out[c].dtype())) + out[c].shape().to_string()
                                    : std::string("an uninitialized tensor")) +
              " for component " + std::to_string(c) + ", expected " + std::string(dtype_name(spec.dtypes[c])) +
              spec.shapes[c].to_string() + " (pass the output spec to map())");
      return true;
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    auto it = std::make_unique<It>();
    it->d = self<MapDataset>();
    it->input = input_->make_iterator(ctx);
    return it;
  }

 private:
  ImplPtr input_;
  Dataset::MapFn fn_;
};

class TakeDataset : public DatasetImpl {
 public:
  TakeDataset(ImplPtr input, int64_t count)
      : DatasetImpl(input->spec(), cardinality_of(input->cardinality(), count),
                    input->describe() + ".take(" + std::to_string(count) + ")", input->same_order(),
                    input->row_access()),
        input_(std::move(input)),
        count_(count) {}

  static int64_t cardinality_of(int64_t n, int64_t count) {
    if (count < 0) return n;
    if (n == kInfiniteCardinality) return count;
    return n == kUnknownCardinality ? n : std::min(n, count);
  }

  struct It : ElementIterator {
    std::shared_ptr<const TakeDataset> d;
    std::unique_ptr<ElementIterator> input;
    int64_t left;  // < 0: unlimited
    explicit It(bool rows) : ElementIterator(rows) {}
    template <typename Pull>
    bool next(Pull&& pull) {
      if (left == 0) return false;
      if (!pull()) {
        left = 0;
        return false;
      }
      if (left > 0) --left;
      return true;
    }
    bool next_row(RowRef& r) override {
      return next([&] { return input->next_row(r); });
    }
    bool get_next(std::vector<Tensor>& out) override {
      return next([&] { return input->get_next(out); });
    }
    int64_t skip(int64_t n) override {
      const int64_t k = input->skip(left < 0 ? n : n < 0 ? left : std::min(n, left));
      if (left > 0) left -= k;
      return k;
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    auto it = std::make_unique<It>(row_access());
    it->d = self<TakeDataset>();
    it->input = input_->make_iterator(ctx);
    it->left = count_;
    return it;
  }

 private:
  ImplPtr input_;
  int64_t count_;
};

class SkipDataset : public DatasetImpl {
 public:
  SkipDataset(ImplPtr input, int64_t count)
      : DatasetImpl(input->spec(), cardinality_of(input->cardinality(), count),
                    input->describe() + ".skip(" + std::to_string(count) + ")", input->same_order(),
                    input->row_access()),
        input_(std::move(input)),
        count_(count) {}

  static int64_t cardinality_of(int64_t n, int64_t count) {
    if (count < 0) return n == kInfiniteCardinality ? kUnknownCardinality : 0;  // skipping forever
    return n < 0 ? n : std::max<int64_t>(0, n - count);
  }

  struct It : ElementIterator {
    std::shared_ptr<const SkipDataset> d;
    std::unique_ptr<ElementIterator> input;
    int64_t to_skip;
    explicit It(bool rows) : ElementIterator(rows) {}
    void skip_first() {
      if (to_skip != 0) input->skip(std::exchange(to_skip, 0));
    }
    bool next_row(RowRef& r) override {
      skip_first();
      return input->next_row(r);
    }
    bool get_next(std::vector<Tensor>& out) override {
      skip_first();
      return input->get_next(out);
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    auto it = std::make_unique<It>(row_access());
    it->d = self<SkipDataset>();
    it->input = input_->make_iterator(ctx);
    it->to_skip = count_;
    return it;
  }

 private:
  ImplPtr input_;
  int64_t count_;
};

class ShardDataset : public DatasetImpl {
 public:
  ShardDataset(ImplPtr input, int64_t num_shards, int64_t index)
      : DatasetImpl(input->spec(), cardinality_of(input->cardinality(), num_shards, index),
                    input->describe() + ".shard(" + std::to_string(num_shards) + ", " + std::to_string(index) + ")",
                    input->same_order(), input->row_access()),
        input_(std::move(input)),
        num_shards_(num_shards),
        index_(index) {}

  static int64_t cardinality_of(int64_t n, int64_t num_shards, int64_t index) {
    if (n < 0) return n;
    return n > index ? (n - index + num_shards - 1) / num_shards : 0;
  }

  struct It : ElementIterator {
    std::shared_ptr<const ShardDataset> d;
    std::unique_ptr<ElementIterator> input;
    int64_t to_skip;  // before the next element: `index` first, then the other shards' elements
    bool done = false;
    explicit It(bool rows) : ElementIterator(rows) {}
    template <typename Pull>
    bool next(Pull&& pull) {
      if (done) return false;
      // skip() says how many it dropped: fewer than asked means the input ended.
      if (to_skip > 0 && input->skip(to_skip) < to_skip) done = true;
      to_skip = d->num_shards_ - 1;
      if (done || !pull()) {
        done = true;
        return false;
      }
      return true;
    }
    bool next_row(RowRef& r) override {
      return next([&] { return input->next_row(r); });
    }
    bool get_next(std::vector<Tensor>& out) override {
      return next([&] { return input->get_next(out); });
    }
  };

  std::unique_ptr<ElementIterator> make_stage_iterator(const Context& ctx) const override {
    auto it = std::make_unique<It>(row_access());
    it->d = self<ShardDataset>();
    it->input = input_->make_iterator(ctx);
    it->to_skip = index_;
    return it;
  }

 private:
  ImplPtr input_;
  int64_t num_shards_, index_;
};

std::string csv_description(const std::string& path, const CsvOptions& o) {
  std::string s = "csv(" + path;
  if (o.label_column != -1)
    s += o.label_column ? ", label_column=" + std::to_string(*o.label_column) : std::string(", no label");
  if (o.header_lines) s += ", header_lines=" + std::to_string(o.header_lines);
  return s + ")";
}

// The tensors' rows (one_element: each tensor as the single row), copied.
std::shared_ptr<SlicesDataset> make_slices(const std::vector<Tensor>& components, bool one_element) {
  const char* what = one_element ? "from_tensors" : "from_tensor_slices";
  if (components.empty()) throw InvalidArgumentError(std::string(what) + ": no tensors");
  std::vector<Tensor> columns;
  std::string description = std::string(what) + "(";
  for (size_t i = 0; i < components.size(); ++i) {
    Tensor t = components[i];
    if (!t.initialized())
      throw InvalidArgumentError(std::string(what) + ": tensor " + std::to_string(i) + " is uninitialized");
    description += (i ? ", " : "") + std::string(dtype_name(t.dtype())) + t.shape().to_string();
    if (one_element) t = t.reshaped(prepend_dim(1, t.shape(), what));
    if (t.rank() < 1)
      throw InvalidArgumentError(std::string(what) + ": tensor " + std::to_string(i) +
                                 " is a scalar; it needs a dimension to slice");
    if (!columns.empty() && t.dim(0) != columns[0].dim(0))
      throw InvalidArgumentError(std::string(what) + ": all tensors must have the same size in dimension 0, got " +
                                 components[0].shape().to_string() + " and " + components[i].shape().to_string());
    columns.push_back(t.deep_copy());
  }
  return std::make_shared<SlicesDataset>(std::move(columns), description + ")");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Dataset

Dataset Dataset::csv(const std::string& path, const CsvOptions& options) {
  return Dataset(std::make_shared<SlicesDataset>(read_csv_table(path, options), csv_description(path, options)));
}

Dataset Dataset::from_idx(const std::string& images_path, const std::string& labels_path) {
  const Tensor images = read_idx(images_path), labels = read_idx(labels_path);
  if (images.rank() < 1 || labels.rank() != 1 || labels.dim(0) != images.dim(0) || !is_integer(labels.dtype()))
    throw InvalidArgumentError("Dataset::from_idx: '" + labels_path + "' (" + std::string(dtype_name(labels.dtype())) +
                               labels.shape().to_string() + ") must hold one integer label per image of '" +
                               images_path + "' (" + images.shape().to_string() + ")");
  const int64_t n = images.dim(0);
  if (n == 0) throw InvalidArgumentError("Dataset::from_idx: '" + images_path + "' holds no images");
  const int64_t pixels = images.num_elements() / n;
  Tensor features(DType::kFloat32, Shape{n, pixels});
  float* out = features.data<float>();
  if (images.dtype() == DType::kInt32) {
    for (int32_t v : images.flat<int32_t>()) *out++ = static_cast<float>(v);
  } else if (images.dtype() == DType::kFloat64) {
    for (double v : images.flat<double>()) *out++ = static_cast<float>(v);
  } else {
    std::memcpy(out, images.raw_data(), static_cast<size_t>(images.bytes()));
  }
  return Dataset(std::make_shared<SlicesDataset>(std::vector<Tensor>{features, labels},
                                                 "idx(" + images_path + ", " + labels_path + ")"));
}

Dataset Dataset::from_tensor_slices(const std::vector<Tensor>& components) {
  return Dataset(make_slices(components, /*one_element=*/false));
}

Dataset Dataset::from_tensors(const std::vector<Tensor>& components) {
  return Dataset(make_slices(components, /*one_element=*/true));
}

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) throw InvalidArgumentError("range: step must not be 0");
  return Dataset(std::make_shared<RangeDataset>(start, stop, step,
                                                "range(" + std::to_string(start) + ", " + std::to_string(stop) +
                                                    (step == 1 ? "" : ", " + std::to_string(step)) + ")"));
}

Dataset Dataset::shuffle(int64_t buffer_size, std::optional<uint64_t> seed, bool reshuffle_each_iteration) const {
  if (buffer_size <= 0) throw InvalidArgumentError("shuffle: buffer_size must be greater than zero.");
  return Dataset(std::make_shared<ShuffleDataset>(impl_, buffer_size, seed, reshuffle_each_iteration));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  if (batch_size <= 0) throw InvalidArgumentError("batch: batch_size must be greater than zero.");
  return Dataset(std::make_shared<BatchDataset>(impl_, batch_size, drop_remainder));
}

Dataset Dataset::repeat(int64_t count) const { return Dataset(std::make_shared<RepeatDataset>(impl_, count)); }

Dataset Dataset::map(MapFn fn, std::optional<ElementSpec> output_spec) const {
  if (!fn) throw InvalidArgumentError("map: the function is empty");
  if (output_spec && (output_spec->dtypes.empty() || output_spec->dtypes.size() != output_spec->shapes.size()))
    throw InvalidArgumentError("map: the output spec needs one dtype and one shape per component, got " +
                               std::to_string(output_spec->dtypes.size()) + " and " +
                               std::to_string(output_spec->shapes.size()));
  return Dataset(std::make_shared<MapDataset>(impl_, std::move(fn), output_spec ? *output_spec : impl_->spec()));
}

Dataset Dataset::take(int64_t count) const { return Dataset(std::make_shared<TakeDataset>(impl_, count)); }
Dataset Dataset::skip(int64_t count) const { return Dataset(std::make_shared<SkipDataset>(impl_, count)); }
Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  // tf.data's messages.
  if (num_shards <= 0)
    throw InvalidArgumentError("shard: Number of shards must be greater than zero (currently num_shards = " +
                               std::to_string(num_shards) + ").");
  if (index < 0 || index >= num_shards)
    throw InvalidArgumentError("shard: Index must be between 0 and " + std::to_string(num_shards - 1) +
                               " (currently index = " + std::to_string(index) + ").");
  return Dataset(std::make_shared<ShardDataset>(impl_, num_shards, index));
}

const ElementSpec& Dataset::element_spec() const { return impl_->spec(); }
int64_t Dataset::cardinality() const { return impl_->cardinality(); }
std::string Dataset::describe() const { return impl_->describe(); }
bool Dataset::same_order_every_pass() const { return impl_->same_order(); }
std::shared_ptr<const DatasetSource> Dataset::source() const { return impl_; }

Iterator Dataset::make_iterator(const Scope& scope, CallSite site) const {
  // with_op_name names the IteratorGetNext node; the initializers keep their default names.
  Iterator it(scope.with_name_scope(""));
  it.outputs_ = iterator_get_next(scope, impl_, site);
  it.initializer_ = stepscope::make_iterator(it.scope_, it.outputs_.front().node, nullptr, site);
  it.spec_ = impl_->spec();
  return it;
}

Node* Iterator::make_initializer(const Dataset& dataset, CallSite site) const {
  return make_iterator(scope_, outputs_.front().node, dataset.source(), site);
}

void NextElement::check_pair() const {
  if (outputs_.size() != 2)
    throw InvalidArgumentError("cannot unpack " + std::to_string(outputs_.size()) +
                               " dataset components into 2 names; index the element instead");
}

std::pair<Dataset, Dataset> split_dataset(const Dataset& dataset, const SplitOptions& options) {
  const bool by_size = options.left_size >= 0, by_fraction = options.left_fraction >= 0;
  if (by_size == by_fraction)
    throw InvalidArgumentError("split_dataset: give exactly one of left_size and left_fraction");
  if (!dataset.same_order_every_pass())
    throw InvalidArgumentError("split_dataset: " + dataset.describe() +
                               " is reshuffled on every pass, so its parts would overlap; split before shuffle() "
                               "(or shuffle with a seed and reshuffle_each_iteration = false)");
  int64_t left = options.left_size;
  if (by_fraction) {
    const int64_t n = dataset.cardinality();
    if (options.left_fraction > 1) throw InvalidArgumentError("split_dataset: left_fraction must be in [0, 1]");
    if (n < 0)
      throw InvalidArgumentError("split_dataset: left_fraction needs a dataset of known, finite size; " +
                                 dataset.describe() + " has cardinality " + std::to_string(n));
    left = std::llround(options.left_fraction * static_cast<double>(n));
  }
  return {dataset.take(left), dataset.skip(left)};
}

}  // namespace stepscope
