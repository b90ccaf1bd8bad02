// DeviceLoad: the device work of mobile objects, counted in their load. A handler that runs a
// kernel submits it and returns; the kernel's time is not in the handler's, so without this
// the policies see a rank whose objects only submit kernels as idle, and a rank with no device
// (where the same kernels run on the cpu device, slower) as no busier than one with a fast
// device. Submitted through a DeviceLoad, a device task counts for the object whose handler
// submitted it: while it runs it is work of this rank (it finishes here whatever the object
// does next), and its measured run time (DeviceTask::seconds, over the rank's devices of that
// kind) adds to the cost of the object's requests here. The Balancer also learns how many
// accelerators this rank has, which the shipped policies tell the ranks they ask for work: a
// rank with a device is given work by the cost of a request there (see
// <cascade/balance/balancer.hpp> and detail/donate.hpp).
//
//   cascade::Devices devs(tp, {.sim = 1});
//   cascade::DeviceLoad load(objs, devs);
//   step = objs.make_handler<Block>([&](Block& b, cascade::mobile_ptr<Block>& self) {
//       load.submit(self, update, cascade::readwrite(b.grid), b.n, cascade::Launch{})
//           .then([&, self] { step->invoke(self, self); });   // the next step, once done
//   });
//
// The balance layer sits on the objects layer and MPI; the device layer on the core alone.
// Neither moves: this header is the one file of the balance layer that may include the device
// layer (tools/check-layers names it), and it is header-only, so neither library links the
// other. A program that includes it links Cascade::device and Cascade::cascade.
#pragma once

#include <exception>
#include <memory>

#include "cascade/balance/balancer.hpp"
#include "cascade/device/devices.hpp"
#include "cascade/objects/objects.hpp"

namespace cascade {

/// Counts the device tasks that handlers of mobile objects submit in the objects' load (see
/// the top of this file). Make one per Objects and Devices (any thread, any time; it holds
/// references to both); its members may be called from any thread, handlers included.
class DeviceLoad {
  public:
    /// Device tasks submitted through it on `devs` count for objects of `objs`.
    DeviceLoad(Objects& objs, Devices& devs) : objs_(objs), devs_(devs) {
        for (int i = 0; i < devs.size(); ++i)
            if (devs.device(i).kind() != DeviceKind::cpu) ++accelerators_;
        tell();
    }

    /// Devices::submit, counted for `self` (the object whose handler submits it).
    template <class T, class... A>
    DeviceTask submit(const mobile_ptr<T>& self, const Kernel& kernel, const A&... args) {
        return count(self.key(), devs_.submit(kernel, args...));
    }

    /// Counts `t` (submitted on this DeviceLoad's Devices) for the object `key`; returns `t`.
    /// Throws UsageError, counting nothing, for a task prepared and not submitted.
    const DeviceTask& count(const ObjectKey& key, const DeviceTask& t) {
        Balancer* b = tell();
        if (!b || !t.valid()) return t;
        std::shared_ptr<detail::DeviceWork> work = b->device_work();
        work->submitted(key);    // before on_done: the task may finish at once
        Devices* devs = &devs_;  // outlives its tasks (its destructor waits for them)
        try {
            t.on_done([work, key, t, devs](std::exception_ptr) {
                const int d = t.device();
                int parallel = 1;  // the cpu device: its kernels share the pool's workers
                if (d >= 0 && devs->device(d).kind() != DeviceKind::cpu) {
                    parallel = 0;
                    for (int i = 0; i < devs->size(); ++i)
                        parallel += devs->device(i).kind() == devs->device(d).kind();
                }
                work->finished(key, t.seconds(), parallel);
            });
        } catch (...) {  // not submitted (Devices::prepare without submit): not counted
            work->withdrawn(key);
            throw;
        }
        return t;
    }

    /// Accelerators of its Devices (devices other than `cpu`).
    int accelerators() const noexcept { return accelerators_; }

  private:
    // The Balancer in place now (a program's own may take over from CASCADE_BALANCE's), told
    // this rank's accelerators.
    Balancer* tell() {
        Balancer* b = objs_.balancer();
        if (b) b->device_work()->set_devices(accelerators_);
        return b;
    }

    Objects& objs_;
    Devices& devs_;
    int accelerators_ = 0;
};

}  // namespace cascade
