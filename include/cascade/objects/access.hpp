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
    /// How the handler uses its object (see Access).
    Access access = Access::exclusive;
    /// In errors and traces: "<name>(<type> <home>:<id>)"; default "handler#<n>".
    std::string name;
    /// Run inside the message handler on the communication thread instead of on a worker,
    /// when a request from another rank may start at once: for tiny handlers (saves the
    /// hand-off to a worker, like AsyncOptions::run_in_handler). Such a handler must not
    /// block or wait on futures.
    bool run_in_handler = false;
};

}  // namespace cascade
