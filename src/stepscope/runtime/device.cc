#include "stepscope/runtime/device.h"

#include <string>

namespace stepscope {

std::string device_name(std::string_view type, int index) {
  return "/job:localhost/replica:0/task:0/device:" + std::string(type) + ":" + std::to_string(index);
}

Device::Device(std::string type, int index, Allocator* allocator)
    : name_(device_name(type, index)), type_(std::move(type)), index_(index), allocator_(allocator) {}

CpuDevice::CpuDevice(int index) : Device("CPU", index, cpu_allocator()) {}

}  // namespace stepscope
