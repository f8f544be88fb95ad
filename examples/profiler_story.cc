// Seed 004's story (a 2018 blog post on tf.profiler), in C++: a Profiler on the graph, a
// FULL_TRACE RunMetadata every 5 steps handed to add_step, then the option builder with
// trainable_variables_parameter, a timeline output, a 100 MB memory floor, the selected columns
// and order, profile_name_scope — and each of the code, op, scope and graph views.
//
//   profiler_story [--data data/digits.csv.gz] [--steps 50]
#include <cstdio>
#include <string>

#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

using namespace stepscope;

int main(int argc, char** argv) {
  std::string data = "data/digits.csv.gz";
  int max_step = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--data")
      data = argv[i + 1];
    else if (flag == "--steps")
      max_step = std::stoi(argv[i + 1]);
  }
  try {
    // The input: batches of 64 rows, read on the host and fed through placeholders as the blog does.
    Graph input_graph;
    auto scale = [](std::vector<Tensor> row) {
      for (float& v : row[0].flat<float>()) v /= 16.0f;
      return row;
    };
    auto next = Dataset::csv(data)
                    .map(scale)
                    .batch(64, /*drop_remainder=*/true)
                    .repeat()
                    .make_iterator(Scope(input_graph))
                    .get_next();
    Session input_session(input_graph);

    // ... the graph (the blog leaves it out) ...
    Graph graph;
    Scope root(graph);
    Output images_placeholder = placeholder(root.with_op_name("images"), DType::kFloat32, Shape{64, 64});
    Output labels_placeholder = placeholder(root.with_op_name("labels"), DType::kInt32, Shape{64});
    Output hidden = nn::dense(root.with_name_scope("siamese/hidden"), images_placeholder, 128, nn::Activation::relu);
    Output logits = nn::dense(root.with_name_scope("siamese/logits"), hidden, 10);
    Output loss = reduce_mean(root.with_name_scope("loss"),
                              sparse_softmax_cross_entropy_with_logits(root, labels_placeholder, logits));
    Node* train_op = GradientDescentOptimizer(0.5).minimize(root, loss);
    Node* init = global_variables_initializer(root);

    Session sess(graph);
    sess.run(init);
    Profiler graph_profiler(graph);  // the blog's cmd='scope' is not an argument: the view is chosen per call
    RunMetadata run_metadata;
    RunOptions run_options;
    run_options.trace_level = TraceLevel::kFullTrace;

    for (int step = 0; step < max_step; ++step) {
      std::vector<Tensor> batch = input_session.run({}, {next[0], next[1]});
      const FeedList feed_dict{{images_placeholder, batch[0]}, {labels_placeholder, batch[1]}};
      float loss_value;
      if (step % 5 == 0) {
        // Every 5 steps, collect statistics and add them to the profiler.
        loss_value = sess.run(feed_dict, {loss}, {train_op}, run_options, &run_metadata)[0].scalar_value<float>();
        graph_profiler.add_step(step, run_metadata);
      } else {
        loss_value = sess.run(feed_dict, {loss}, {train_op})[0].scalar_value<float>();
      }
      if (step % 10 == 0) std::printf("step %d: loss %.4f\n", step, loss_value);
    }

    // The blog's options, as it writes them.
    ProfileOptionBuilder profile_scope_opt_builder(ProfileOptionBuilder::trainable_variables_parameter());
    profile_scope_opt_builder.with_timeline_output("train_profiler.json");
    profile_scope_opt_builder.with_min_bytes(1024 * 1024 * 100);  // only show > 100 MB
    profile_scope_opt_builder.select({"params", "bytes", "input_shapes", "micros", "device"});
    profile_scope_opt_builder.order_by("bytes");
    std::printf("\n== profile_name_scope with the blog's options (timeline output)\n");
    graph_profiler.profile_name_scope(profile_scope_opt_builder.build());

    // The blog's floor leaves this small model nothing to show (a timeline of metadata only):
    // the same view with floors it passes, as a timeline with every op of the step.
    graph_profiler.profile_name_scope(ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory())
                                          .with_step((max_step - 1) / 5 * 5)  // the last traced step
                                          .with_timeline_output("train_ops.json")
                                          .build());

    // A floor the tiny model can pass, printed to stdout.
    std::printf("\n== scope view: parameters, bytes, time\n");
    graph_profiler.profile_name_scope(ProfileOptionBuilder(ProfileOptionBuilder::trainable_variables_parameter())
                                          .select({"params", "bytes", "micros"})
                                          .order_by("params")
                                          .build());
    std::printf("\n== op view: time and memory\n");
    graph_profiler.profile_operations(ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory())
                                          .select({"micros", "bytes", "occurrence"})
                                          .order_by("micros")
                                          .build());
    std::printf("\n== code view: time by source line\n");
    graph_profiler.profile_code(ProfileOptionBuilder().with_max_depth(6).select({"micros"}).order_by("micros").build());
    std::printf("\n== graph view: float operations\n");
    graph_profiler.profile_graph(
        ProfileOptionBuilder(ProfileOptionBuilder::float_operation()).with_max_depth(4).build());
    std::printf("\n== advice\n");
    graph_profiler.advise();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profiler_story: %s\n", e.what());
    return 2;
  }
  return 0;
}
