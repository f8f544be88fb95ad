// Device: what the runtime places a node on — its canonical name (TensorFlow's
// "/job:localhost/replica:0/task:0/device:CPU:0"), its type ("CPU", "GPU"), the Allocator its
// kernels' tensors come from, and the kernel it runs a given op with. CpuDevice is the one device
// this build has; a CUDA device would sit beside it (see README.md, "GPUs").
//
// The executor resolves a node's device once per plan (DeviceSet::device_for, at plan build),
// keeping the kernel the device gives; a step calls no method of a Device.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "stepscope/core/allocator.h"
#include "stepscope/graph/op_def.h"

namespace stepscope {

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // "/job:localhost/replica:0/task:0/device:<type>:<index>"
  const std::string& name() const { return name_; }
  // "CPU" or "GPU", as in the name.
  const std::string& device_type() const { return type_; }
  int index() const { return index_; }
  // Where the tensors of the kernels run here are allocated.
  Allocator* allocator() const { return allocator_; }
  // The kernel that runs `op` on this device; null when it has none.
  virtual KernelFn kernel_for(const OpDef& op) const = 0;

 protected:
  Device(std::string type, int index, Allocator* allocator);

 private:
  std::string name_, type_;
  int index_;
  Allocator* allocator_;
};

// The host: every op's CPU kernel, tensors from cpu_allocator(). Every CPU index ("/cpu:1") is a
// CpuDevice of its own name over the same cores and allocator, as stepscope has always run them.
class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int index = 0);
  KernelFn kernel_for(const OpDef& op) const override { return op.kernel; }
};

// "/job:localhost/replica:0/task:0/device:" + type + ":" + index
std::string device_name(std::string_view type, int index);

}  // namespace stepscope
