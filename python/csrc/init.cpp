// The module dfccl_torch._C: the backend class and its constructor. Import torch.distributed first, so that pybind
// knows the base type c10d::Backend.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "ProcessGroupDFCCL.hpp"

namespace py = pybind11;
using dfccl_torch::GroupParams;
using dfccl_torch::ProcessGroupDFCCL;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::module::import("torch.distributed");
  py::class_<ProcessGroupDFCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupDFCCL>>(m, "ProcessGroupDFCCL")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string groupId, std::vector<uint64_t> globalRanks,
                       int cudaDevice) {
             GroupParams p{store, rank, size, timeout, std::move(groupId), std::move(globalRanks), cudaDevice};
             return c10::make_intrusive<ProcessGroupDFCCL>(p);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("group_id"),
           py::arg("global_ranks"), py::arg("cuda_device") = -1, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("group_id", &ProcessGroupDFCCL::groupName)
      .def_property_readonly("has_cuda", &ProcessGroupDFCCL::hasCudaComm)
      .def("memory", &ProcessGroupDFCCL::memory,
           "{'cpu'|'cuda': (connectionBytes, p2pBytes)}: this rank's connection memory per communicator of the group "
           "(dfcclCommGetInfo); empty after shutdown or abort")
      .def("prepare_shrink", &ProcessGroupDFCCL::prepareShrink, py::arg("exclude"),
           "After a failure, on every survivor: agree with the others on the group ranks to exclude (dfcclCommShrink; "
           "exclude empty: the ranks this rank found failed) and make the group of the rest, which "
           "dist.shrink_group(<that set>) then returns; the agreed set, increasing ([]: nothing failed, nothing "
           "made). dfccl_torch.shrink_group does both",
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("parent_ranks", &ProcessGroupDFCCL::parentRanks,
                             "a shrunk group: the ranks of its ranks in the group it was shrunk from ([] otherwise)")
      .def("op_counts", &ProcessGroupDFCCL::opCounts,
           "{op: count}: the ops issued on this rank of the group so far, by the backend's op name (allreduce, "
           "_allgather_base, send, ...)");
  m.def("version", [] {
    int v = 0;
    dfcclGetVersion(&v);
    return v;
  });
}
