// DeviceSet: the devices a Session can place nodes on (TensorFlow's DeviceMgr/DeviceSet), and
// the placement of a node by the device string its Scope gave it.
//
// A Session owns one; it starts with the host's CPU:0, and a CPU device of any other index is
// made the first time a node asks for it (placing ops on "/cpu:1" has always run them on the
// host, under that device's name). A node placed on a device type nobody registered gets an
// InvalidArgumentError naming the node. (Scope::with_device rejects "/gpu:0" before that, as it
// always has: this build has no GPU device to register; there is no soft placement.)
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "stepscope/graph/node.h"
#include "stepscope/runtime/device.h"
#include "stepscope/runtime/device_tracer.h"

namespace stepscope {

class DeviceSet {
 public:
  DeviceSet();  // the host's CPU:0
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  // Registers a device (its name must be new: InvalidArgumentError otherwise).
  Device* add(std::unique_ptr<Device> device);
  // The device of that canonical name; null when there is none (CPU ones are made on demand).
  Device* find(std::string_view canonical_name);
  // The device `node` is placed on; InvalidArgumentError naming the node when none of its type
  // is registered.
  Device* device_for(const Node& node) { return device_for(node, node.device()); }
  // The same for `canonical_name` in place of the node's own device.
  Device* device_for(const Node& node, std::string_view canonical_name);
  Device* host() const { return host_; }
  // The devices registered so far, in the order they were added.
  std::vector<const Device*> devices() const;

  // A tracer of device activity for the steps traced at HARDWARE_TRACE or FULL_TRACE (see
  // device_tracer.h). Add tracers before running steps.
  void add_tracer(std::unique_ptr<DeviceTracer> tracer) { tracers_.push_back(std::move(tracer)); }
  const std::vector<std::unique_ptr<DeviceTracer>>& tracers() const { return tracers_; }

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Device>> devices_;
  Device* host_ = nullptr;
  std::vector<std::unique_ptr<DeviceTracer>> tracers_;
};

}  // namespace stepscope
