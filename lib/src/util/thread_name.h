// Names of the threads the library starts, as top -H, ps -L, gdb and py-spy show them (/proc/<pid>/task/<tid>/comm).
#pragma once

namespace dfccl {

// Caller: the first statement of every thread body the library starts. Names the calling thread "dfccl-<role>",
// cut to the kernel's 15 characters (role: at most 9). Every name is listed in docs/design.md ("Threads").
void name_this_thread(const char* role);

// The same with a number after the role: ("hb", 3) names the thread "dfccl-hb3".
void name_this_thread(const char* role, unsigned n);

}  // namespace dfccl
