#include "device/device.h"

namespace sluice::device {

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Reset();
    device_ = o.device_;
    kind_ = o.kind_;
    data_ = o.data_;
    size_ = o.size_;
    o.device_ = nullptr;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void Buffer::Reset() {
  if (device_ != nullptr && data_ != nullptr) device_->Free(kind_, data_);
  device_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace sluice::device
