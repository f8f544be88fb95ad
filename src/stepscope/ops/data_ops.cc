#include "stepscope/ops/data_ops.h"

#include <algorithm>
#include <mutex>

#include "stepscope/base/clock.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

// The stages timed on this thread while a traced IteratorGetNext pulls an element.
struct InputStageCollection {
  struct Frame {
    std::string_view stage;
    int64_t child_ns = 0;  // in the stages it pulled from
  };
  std::vector<Frame> frames;  // the stages in progress, outermost first
  std::vector<KernelStageTime> stages;
};

namespace {
thread_local InputStageCollection* t_collection = nullptr;
}  // namespace

InputStageTimer::InputStageTimer(std::string_view stage) : collection_(t_collection) {
  if (!collection_) return;
  collection_->frames.push_back({stage, 0});
  start_ns_ = now_ns();
}

InputStageTimer::~InputStageTimer() {
  if (!collection_) return;
  const int64_t elapsed = now_ns() - start_ns_;
  std::vector<InputStageCollection::Frame>& frames = collection_->frames;
  std::string path = "Iterator";
  for (const InputStageCollection::Frame& f : frames) path.append("::").append(f.stage);
  const int64_t self_ns = elapsed - frames.back().child_ns;
  frames.pop_back();
  if (!frames.empty()) frames.back().child_ns += elapsed;
  auto it = std::find_if(collection_->stages.begin(), collection_->stages.end(),
                         [&](const KernelStageTime& t) { return t.stage == path; });
  if (it == collection_->stages.end()) it = collection_->stages.insert(it, KernelStageTime{std::move(path), 0, 0});
  it->self_ns += self_ns;
  it->calls += 1;
}

int64_t DatasetIterator::skip(int64_t n) {
  std::vector<Tensor> scratch;
  int64_t dropped = 0;
  while ((n < 0 || dropped < n) && get_next(scratch)) ++dropped;
  return dropped;
}

namespace {

// MakeIterator's "iterator" attribute: the IteratorGetNext node whose session state it resets
// (attributes cannot hold a Node*, and a data or control edge would run that node).
class IteratorNodeRef : public AttrObject {
 public:
  explicit IteratorNodeRef(const Node* node) : node(node) {}
  std::string describe() const override { return node->name(); }
  const Node* node;
};

// The per-session state of one IteratorGetNext node. The mutex serializes concurrent runs
// (each gets its own element) and MakeIterator's restarts.
struct IteratorResource {
  std::mutex mutex;
  std::unique_ptr<DatasetIterator> iterator;  // null until the first run or initializer
  bool exhausted = false;                     // sticky: every later run fails too
  std::vector<Tensor> element;                // scratch, reused from run to run
};

IteratorResource& iterator_resource(const KernelContext& c, const Node& get_next_node) {
  return c.resources().get_or_create<IteratorResource>(get_next_node,
                                                       [] { return std::make_unique<IteratorResource>(); });
}

const DatasetSource* dataset_attr(const AttrMap& attrs) {
  const auto& obj = attrs.get<std::shared_ptr<const AttrObject>>("dataset");
  return dynamic_cast<const DatasetSource*>(obj.get());
}

std::string dtypes_string(const std::vector<DType>& dtypes) {
  std::string s = "(";
  for (size_t i = 0; i < dtypes.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(dtypes[i]));
  return s + ")";
}

std::string shapes_string(const std::vector<Shape>& shapes) {
  std::string s = "(";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i].to_string();
  return s + ")";
}

// Errors from inside the pipeline (a map function, a batch of ragged elements) get the node's
// prefix like any kernel error.
template <typename F>
auto with_node_errors(const KernelContext& c, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    c.fail(e.code(), e.what());
  }
}

// In a traced run, the stages the pipeline times on this thread are collected while the kernel
// runs, and reported to the step when it ends (an error included).
class StageCollection {
 public:
  explicit StageCollection(KernelContext& c) : sink_(c.trace_sink()), node_(c.node()) {
    if (!sink_) return;
    previous_ = t_collection;
    t_collection = &collection_;
  }
  ~StageCollection() {
    if (!sink_) return;
    t_collection = previous_;
    if (!collection_.stages.empty()) sink_->add_stages(node_, collection_.stages);
  }

 private:
  KernelTraceSink* sink_;
  const Node& node_;
  InputStageCollection collection_;
  InputStageCollection* previous_ = nullptr;
};

void get_next_kernel(KernelContext& c) {
  const auto* dataset = static_cast<const DatasetSource*>(
      c.attrs().get<std::shared_ptr<const AttrObject>>("dataset").get());  // checked by the shape rule
  IteratorResource& r = iterator_resource(c, c.node());
  std::lock_guard<std::mutex> lock(r.mutex);
  const StageCollection stages(c);
  if (!r.iterator && !r.exhausted) r.iterator = with_node_errors(c, [&] { return dataset->make_iterator(); });
  if (r.exhausted) c.fail(ErrorCode::kOutOfRange, "End of sequence");
  if (!with_node_errors(c, [&] { return r.iterator->get_next(r.element); })) {
    r.exhausted = true;
    r.iterator.reset();  // frees the pipeline's buffers (a shuffle buffer can be large)
    c.fail(ErrorCode::kOutOfRange, "End of sequence");
  }
  // The pipeline promised these dtypes and shapes when the graph was built; a map function or
  // an initializer's other dataset could break the promise only at run time.
  if (static_cast<int>(r.element.size()) != c.num_outputs())
    c.fail("the dataset produced " + std::to_string(r.element.size()) + " components, expected " +
           std::to_string(c.num_outputs()));
  for (int i = 0; i < c.num_outputs(); ++i) {
    Tensor& t = r.element[i];
    if (t.dtype() != c.node().output_dtype(i) || !t.shape().compatible_with(c.node().output_shape(i)))
      c.fail("component " + std::to_string(i) + " is " + std::string(dtype_name(t.dtype())) + t.shape().to_string() +
             ", expected " + std::string(dtype_name(c.node().output_dtype(i))) + c.node().output_shape(i).to_string());
    c.set_output(i, std::move(t));
  }
  r.element.clear();
}

void make_iterator_kernel(KernelContext& c) {
  const Node& get_next_node =
      *static_cast<const IteratorNodeRef&>(*c.attrs().get<std::shared_ptr<const AttrObject>>("iterator")).node;
  const auto* dataset = dataset_attr(c.attrs());
  // Build the new pass before taking the lock, and drop the old one after releasing it.
  std::unique_ptr<DatasetIterator> fresh = with_node_errors(c, [&] { return dataset->make_iterator(); });
  IteratorResource& r = iterator_resource(c, get_next_node);
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    std::swap(r.iterator, fresh);
    r.exhausted = false;
  }
}

}  // namespace

std::vector<Output> iterator_get_next(const Scope& scope, std::shared_ptr<const DatasetSource> dataset, CallSite site) {
  if (!dataset) throw InvalidArgumentError("[IteratorGetNext] dataset is null");
  Node* node = scope.add_node(op_def("IteratorGetNext"), {},
                              {{"dataset", std::shared_ptr<const AttrObject>(std::move(dataset))}}, site);
  std::vector<Output> outputs;
  for (int i = 0; i < node->num_outputs(); ++i) outputs.push_back(node->output(i));
  return outputs;
}

Node* make_iterator(const Scope& scope, Node* iterator_get_next_node, std::shared_ptr<const DatasetSource> dataset,
                    CallSite site) {
  if (!iterator_get_next_node || iterator_get_next_node->op_type() != "IteratorGetNext")
    throw InvalidArgumentError("[MakeIterator] expects an IteratorGetNext node, got " +
                               (iterator_get_next_node ? std::string(iterator_get_next_node->op_type()) + " node '" +
                                                             iterator_get_next_node->name() + "'"
                                                       : std::string("null")));
  if (&iterator_get_next_node->graph() != &scope.graph())
    throw InvalidArgumentError("[MakeIterator] iterator node '" + iterator_get_next_node->name() +
                               "' is from another graph");
  std::shared_ptr<const AttrObject> source =
      dataset ? std::shared_ptr<const AttrObject>(std::move(dataset))
              : iterator_get_next_node->attrs().get<std::shared_ptr<const AttrObject>>("dataset");
  return scope.add_node(
      op_def("MakeIterator"), {},
      {{"dataset", std::move(source)},
       {"iterator", std::shared_ptr<const AttrObject>(std::make_shared<IteratorNodeRef>(iterator_get_next_node))}},
      site);
}

void register_data_ops(OpRegistry& registry) {
  registry.add({.name = "IteratorGetNext",
                .num_inputs = 0,
                .num_outputs = -1,
                .shape =
                    [](ShapeContext& c) {
                      const DatasetSource* d = dataset_attr(c.node().attrs());
                      if (!d) c.fail("attribute 'dataset' is not a dataset");
                      const auto& dtypes = d->output_dtypes();
                      const auto& shapes = d->output_shapes();
                      if (dtypes.empty() || dtypes.size() != shapes.size())
                        c.fail("dataset declares " + std::to_string(dtypes.size()) + " dtypes and " +
                               std::to_string(shapes.size()) + " shapes");
                      for (size_t i = 0; i < dtypes.size(); ++i)
                        c.set_output(static_cast<int>(i), dtypes[i], shapes[i]);
                    },
                .kernel = get_next_kernel,
                .not_differentiable = true,
                .stateful = true,
                .doc = "The next element of a dataset, one output per component; OutOfRangeError "
                       "\"End of sequence\" after the last. The iterator is per-session state."});
  registry.add({.name = "MakeIterator",
                .num_inputs = 0,
                .num_outputs = 0,
                .shape =
                    [](ShapeContext& c) {
                      const DatasetSource* d = dataset_attr(c.node().attrs());
                      if (!d) c.fail("attribute 'dataset' is not a dataset");
                      const auto* ref = dynamic_cast<const IteratorNodeRef*>(
                          c.node().attrs().get<std::shared_ptr<const AttrObject>>("iterator").get());
                      if (!ref) c.fail("attribute 'iterator' does not name an IteratorGetNext node");
                      const Node& it = *ref->node;
                      std::vector<DType> it_dtypes;
                      std::vector<Shape> it_shapes;
                      for (int i = 0; i < it.num_outputs(); ++i) {
                        it_dtypes.push_back(it.output_dtype(i));
                        it_shapes.push_back(it.output_shape(i));
                      }
                      bool compatible =
                          d->output_dtypes() == it_dtypes && d->output_shapes().size() == it_shapes.size();
                      for (size_t i = 0; compatible && i < it_shapes.size(); ++i)
                        compatible = d->output_shapes()[i].compatible_with(it_shapes[i]);
                      if (!compatible)
                        c.fail("dataset with types " + dtypes_string(d->output_dtypes()) + " and shapes " +
                               shapes_string(d->output_shapes()) + " is not compatible with iterator '" + it.name() +
                               "' with types " + dtypes_string(it_dtypes) + " and shapes " + shapes_string(it_shapes));
                    },
                .kernel = make_iterator_kernel,
                .not_differentiable = true,
                .stateful = true,
                .doc = "Restarts an IteratorGetNext node's iterator in this session (iterator.initializer)."});
}

}  // namespace stepscope
