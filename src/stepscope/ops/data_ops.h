// Data ops: IteratorGetNext (the next element of an input pipeline) and MakeIterator (its
// initializer), after TensorFlow 1.x's tf.data iterators.
//
// This layer only knows the interfaces below; the pipelines themselves (CSV files, shuffle,
// batch, ...) live in train/dataset.h. A pipeline is an immutable DatasetSource attached to the
// IteratorGetNext node as its "dataset" attribute. The iterator over it is per-session state
// (kept in the session's ResourceStore, keyed by the IteratorGetNext node), so two sessions over
// one graph iterate independently and each Session::run that fetches the node advances it by
// one element. At the end of the data every run fails with OutOfRangeError "End of sequence"
// (TensorFlow's text) until MakeIterator restarts it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/attr.h"
#include "stepscope/graph/scope.h"

namespace stepscope {

// Walks one pass over a pipeline. Not thread-safe: the kernels serialize calls.
class DatasetIterator {
 public:
  virtual ~DatasetIterator() = default;
  // Replaces `out` with the next element (one tensor per component); false at the end.
  // Errors are thrown as stepscope::Error (the kernel prefixes the node's name).
  virtual bool get_next(std::vector<Tensor>& out) = 0;
  // Drops up to n elements (all of them when n < 0) and returns how many were dropped. The
  // default pulls them through get_next; sources that can jump (in-memory tables) override it.
  virtual int64_t skip(int64_t n);
};

// Times one stage of a pipeline (one call of its get_next, next_row or skip) while the
// IteratorGetNext kernel of a traced run pulls an element: the stage's own time, without the
// stages it pulls from, goes to RunMetadata::input_stages under its path
// ("Iterator::repeat::batch::csv"). Otherwise it reads a thread-local pointer and nothing else.
// `stage` must outlive the timer (a dataset's own name).
struct InputStageCollection;
class InputStageTimer {
 public:
  explicit InputStageTimer(std::string_view stage);
  ~InputStageTimer();
  InputStageTimer(const InputStageTimer&) = delete;
  InputStageTimer& operator=(const InputStageTimer&) = delete;

 private:
  InputStageCollection* collection_;
  int64_t start_ns_ = 0;
};

// An immutable description of a pipeline: what it yields and how to start a pass over it.
class DatasetSource : public AttrObject {
 public:
  // A fresh pass from the beginning. May be called from several threads at once.
  virtual std::unique_ptr<DatasetIterator> make_iterator() const = 0;
  // One dtype and one (possibly partial) shape per component of an element.
  virtual const std::vector<DType>& output_dtypes() const = 0;
  virtual const std::vector<Shape>& output_shapes() const = 0;
};

// IteratorGetNext: one output per component of `dataset`'s elements. The iterator starts on the
// first run in each session (a one-shot iterator needs no initializer) and restarts when the
// initializer below runs.
std::vector<Output> iterator_get_next(const Scope& scope, std::shared_ptr<const DatasetSource> dataset,
                                      CallSite site = CallSite::current());

// MakeIterator: a node with no outputs that, when run, (re)starts the iterator of
// `iterator_get_next_node` in that session over `dataset` (TensorFlow's iterator.initializer, or
// iterator.make_initializer(other_dataset) when `dataset` is given: it must yield the same dtypes
// and compatible shapes, e.g. a test split beside the training one). Null dataset: the one the
// IteratorGetNext node was built with.
Node* make_iterator(const Scope& scope, Node* iterator_get_next_node,
                    std::shared_ptr<const DatasetSource> dataset = nullptr, CallSite site = CallSite::current());

}  // namespace stepscope
