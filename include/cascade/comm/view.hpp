// view<T>: a pointer and a count. As an active-message argument it is sent by value (the
// elements are copied into the message) and, on the receiver, points straight into the
// message buffer, valid for the duration of the handler. Its elements travel as raw bytes,
// so T must be trivially copyable.
#pragma once

#include <cstddef>
#include <type_traits>

namespace cascade {

/// A pointer and a count: an active-message argument sent by value, received in place.
///
/// ```cpp
/// auto* am = comm.make_active_msg([](cascade::view<int>& v) { std::printf("%zu\n", v.size()); });
/// std::vector<int> data{1, 2, 3};
/// am->send(1, cascade::view<int>(data.data(), data.size()));  // prints 3 on rank 1
/// ```
template <class T>
class view {
    static_assert(std::is_trivially_copyable_v<std::remove_cv_t<T>>,
                  "view<T>: T must be trivially copyable (its bytes travel as they are)");

  public:
    /// The element type.
    using value_type = T;
    /// An empty view (null, 0).
    view() = default;
    /// The `size` elements starting at `data` (not owned; not copied until sent).
    view(T* data, std::size_t size) : data_(data), size_(size) {}
    /// The first element.
    T* data() const noexcept { return data_; }
    /// The number of elements.
    std::size_t size() const noexcept { return size_; }
    /// True when size() is 0.
    bool empty() const noexcept { return size_ == 0; }
    /// Iterator to the first element.
    T* begin() const noexcept { return data_; }
    /// Iterator past the last element.
    T* end() const noexcept { return data_ + size_; }
    /// Element `i` (unchecked).
    T& operator[](std::size_t i) const noexcept { return data_[i]; }

  private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

/// view<T>(data, size), with T deduced.
template <class T>
view<T> make_view(T* data, std::size_t size) {
    return view<T>(data, size);
}

}  // namespace cascade
