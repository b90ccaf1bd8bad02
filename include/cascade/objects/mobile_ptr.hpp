// mobile_ptr<T>: the global name of a mobile object (PREMA's mobile pointer). A small
// trivially copyable value, the object's home rank (where it was created, which always
// knows where it is) and an id unique on that rank. It stays valid wherever the object
// migrates, and travels as is inside active-message and async arguments and inside other
// objects.
//
//   cascade::mobile_ptr<Cell> p = objs.create<Cell>(args...);
//   am->send(dest, p);                  // any rank may invoke handlers on it
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace cascade {

struct ObjectKey {
    std::int32_t home = -1;
    std::uint32_t pad = 0;
    std::uint64_t id = 0;
    friend bool operator==(const ObjectKey&, const ObjectKey&) = default;
};

template <class T>
class mobile_ptr {
  public:
    using element_type = T;
    mobile_ptr() = default;
    explicit mobile_ptr(ObjectKey k) noexcept : key_(k) {}

    /// Rank that created the object; it always knows the object's location.
    int home() const noexcept { return key_.home; }
    /// Id of the object among those created on its home rank (from 1).
    std::uint64_t id() const noexcept { return key_.id; }
    /// False for a default-constructed pointer.
    explicit operator bool() const noexcept { return key_.home >= 0; }
    const ObjectKey& key() const noexcept { return key_; }
    friend bool operator==(const mobile_ptr&, const mobile_ptr&) = default;

  private:
    ObjectKey key_;
};

/// "<home>:<id>", the object's part of names in errors and traces.
inline std::string to_string(const ObjectKey& k) {
    return std::to_string(k.home) + ":" + std::to_string(k.id);
}

}  // namespace cascade

template <>
struct std::hash<cascade::ObjectKey> {
    std::size_t operator()(const cascade::ObjectKey& k) const noexcept {
        return std::hash<std::uint64_t>{}(k.id * 0x9e3779b97f4a7c15ull ^
                                          static_cast<std::uint64_t>(k.home));
    }
};
template <class T>
struct std::hash<cascade::mobile_ptr<T>> {
    std::size_t operator()(const cascade::mobile_ptr<T>& p) const noexcept {
        return std::hash<cascade::ObjectKey>{}(p.key());
    }
};
