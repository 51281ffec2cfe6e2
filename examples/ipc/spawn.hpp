#pragma once
// Starting the other processes of a cross-process run: fork, then exec, so that each child gets a
// CUDA context of its own (a forked child cannot use its parent's).
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace ipc_demo {

/**
 * @brief Runs `path` with `arguments` (argv[1] on) in a new process, keeping the descriptors in
 *        `inherited` open across the exec and adding the NAME=value `environment` entries.
 *        Returns the child's pid, or -1.
 */
pid_t spawn(const std::string& path, const std::vector<std::string>& arguments,
            const std::vector<int>& inherited, const std::vector<std::string>& environment = {});

/**
 * @brief Waits up to `timeout_ms` for `pid` to exit, calling `idle` between looks; its exit
 *        status, or -1 when it was killed (by a signal, or here once the time ran out) or `pid`
 *        is no child's (-1 from a failed spawn).
 */
int wait_exit(pid_t pid, int timeout_ms, const std::function<void()>& idle = {});

}  // namespace ipc_demo
