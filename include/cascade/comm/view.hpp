// view<T>: a pointer and a count. As an active-message argument it is sent by value (the
// elements are copied into the message) and, on the receiver, points straight into the
// message buffer, valid for the duration of the handler. Its elements travel as raw bytes,
// so T must be trivially copyable.
#pragma once

#include <cstddef>
#include <type_traits>

namespace cascade {

template <class T>
class view {
    static_assert(std::is_trivially_copyable_v<std::remove_cv_t<T>>,
                  "view<T>: T must be trivially copyable (its bytes travel as they are)");

  public:
    using value_type = T;
    view() = default;
    view(T* data, std::size_t size) : data_(data), size_(size) {}
    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    T* begin() const noexcept { return data_; }
    T* end() const noexcept { return data_ + size_; }
    T& operator[](std::size_t i) const noexcept { return data_[i]; }

  private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

template <class T>
view<T> make_view(T* data, std::size_t size) {
    return view<T>(data, size);
}

}  // namespace cascade
