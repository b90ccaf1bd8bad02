// How a handler uses the object it runs on (PREMA's access privileges).
#pragma once

#include <string>

namespace cascade {

/// exclusive: runs alone on its object (it may modify it). shared: may overlap other shared
/// handlers on the same object, never an exclusive one (it only reads). Handlers on
/// different objects never conflict.
enum class Access { exclusive, shared };

/// Options of Objects::make_handler.
struct HandlerOptions {
    Access access = Access::exclusive;
    std::string
        name;  ///< in errors and traces: "<name>(<type> <home>:<id>)"; default "handler#<n>"
};

}  // namespace cascade
