#include "h5_table.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace dfccl::h5 {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("HDF5: " + what); }

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) fail(what);
  return id;
}

void check_status(herr_t status, const std::string& what) {
  if (status < 0) fail(what);
}

// Closes an HDF5 object id at scope exit.
struct Closer {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Closer() {
    if (id >= 0) close(id);
  }
};

hid_t vlen_string_type() {
  hid_t t = check(H5Tcopy(H5T_C_S1), "H5Tcopy");
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

struct Silence {  // HDF5 prints its error stack by default; our exceptions say what failed.
  Silence() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
const Silence silence_once;

}  // namespace

File File::create(const std::string& path) {
  return File(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create " + path));
}

File File::create_checkpointed(const std::string& path, double spacing) {
  Closer fapl{check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose};
  check_status(H5Pset_fapl_core(fapl.id, 1 << 20, false), "H5Pset_fapl_core");  // in memory only
  File f(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), "cannot create " + path), path, spacing);
  f.flush();  // an unwritable path fails here, before anything runs
  return f;
}

void File::write_image() {
  const auto t0 = std::chrono::steady_clock::now();
  const ssize_t n = H5Fget_file_image(id_, nullptr, 0);
  if (n < 0) fail("H5Fget_file_image of " + image_path_);
  std::vector<char> image(static_cast<size_t>(n));
  if (H5Fget_file_image(id_, image.data(), image.size()) != n) fail("H5Fget_file_image of " + image_path_);
  const std::string partial = image_path_ + ".partial";
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + partial + ": " + std::strerror(errno));
  for (size_t done = 0; done < image.size();) {
    const ssize_t w = ::write(fd, image.data() + done, image.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      fail("cannot write " + partial + ": " + why);
    }
    done += size_t(w);
  }
  if (::close(fd) != 0) fail("cannot write " + partial + ": " + std::strerror(errno));
  if (std::rename(partial.c_str(), image_path_.c_str()) != 0)
    fail("cannot rename " + partial + " to " + image_path_ + ": " + std::strerror(errno));
  const auto t1 = std::chrono::steady_clock::now();
  image_done_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
  image_cost_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

File File::open_read(const std::string& path) {
  return File(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open " + path));
}

File::File(File&& other) noexcept
    : id_(other.id_),
      image_path_(std::move(other.image_path_)),
      image_spacing_(other.image_spacing_),
      image_done_ns_(other.image_done_ns_),
      image_cost_ns_(other.image_cost_ns_) {
  other.id_ = -1;
}

File::~File() {
  if (id_ >= 0) H5Fclose(id_);
}

int64_t File::group(const std::string& path, bool create) const {
  hid_t cur = check(H5Gopen2(id_, "/", H5P_DEFAULT), "open /");
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    std::string part = path.substr(pos, next - pos);
    pos = next + 1;
    if (part.empty()) continue;
    hid_t child;
    if (H5Lexists(cur, part.c_str(), H5P_DEFAULT) > 0) {
      child = H5Gopen2(cur, part.c_str(), H5P_DEFAULT);
    } else if (create) {
      child = H5Gcreate2(cur, part.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    } else {
      H5Gclose(cur);
      fail("no group " + path);
    }
    H5Gclose(cur);
    cur = check(child, "group " + path);
  }
  return cur;
}

void File::set_attr(const std::string& g, const std::string& name, const std::string& value) {
  Closer grp{group(g, true), H5Gclose};
  if (H5Aexists(grp.id, name.c_str()) > 0) H5Adelete(grp.id, name.c_str());
  Closer type{vlen_string_type(), H5Tclose};
  Closer space{check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose};
  Closer attr{check(H5Acreate2(grp.id, name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), "attr " + name),
              H5Aclose};
  const char* ptr = value.c_str();
  check_status(H5Awrite(attr.id, type.id, &ptr), "write attr " + name);
}

namespace {
template <class T>
void set_numeric_attr(hid_t grp, const std::string& name, hid_t type, T value) {
  if (H5Aexists(grp, name.c_str()) > 0) H5Adelete(grp, name.c_str());
  Closer space{check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose};
  Closer attr{check(H5Acreate2(grp, name.c_str(), type, space.id, H5P_DEFAULT, H5P_DEFAULT), "attr " + name), H5Aclose};
  check_status(H5Awrite(attr.id, type, &value), "write attr " + name);
}
}  // namespace

void File::set_attr(const std::string& g, const std::string& name, double value) {
  Closer grp{group(g, true), H5Gclose};
  set_numeric_attr(grp.id, name, H5T_NATIVE_DOUBLE, value);
}

void File::set_attr(const std::string& g, const std::string& name, int64_t value) {
  Closer grp{group(g, true), H5Gclose};
  set_numeric_attr(grp.id, name, H5T_NATIVE_INT64, value);
}

bool File::has_attr(const std::string& g, const std::string& name) const {
  if (!has(g)) return false;
  Closer grp{group(g, false), H5Gclose};
  return H5Aexists(grp.id, name.c_str()) > 0;
}

std::string File::attr_string(const std::string& g, const std::string& name) const {
  Closer grp{group(g, false), H5Gclose};
  Closer attr{check(H5Aopen(grp.id, name.c_str(), H5P_DEFAULT), "no attribute " + name), H5Aclose};
  Closer type{vlen_string_type(), H5Tclose};
  char* ptr = nullptr;
  check_status(H5Aread(attr.id, type.id, &ptr), "read attr " + name);
  std::string out = ptr ? ptr : "";
  H5free_memory(ptr);
  return out;
}

double File::attr_double(const std::string& g, const std::string& name) const {
  Closer grp{group(g, false), H5Gclose};
  Closer attr{check(H5Aopen(grp.id, name.c_str(), H5P_DEFAULT), "no attribute " + name), H5Aclose};
  double v = 0;
  check_status(H5Aread(attr.id, H5T_NATIVE_DOUBLE, &v), "read attr " + name);
  return v;
}

int64_t File::attr_int(const std::string& g, const std::string& name) const {
  Closer grp{group(g, false), H5Gclose};
  Closer attr{check(H5Aopen(grp.id, name.c_str(), H5P_DEFAULT), "no attribute " + name), H5Aclose};
  int64_t v = 0;
  check_status(H5Aread(attr.id, H5T_NATIVE_INT64, &v), "read attr " + name);
  return v;
}

namespace {
void write_dataset(hid_t grp, const std::string& name, hid_t type, size_t n, const void* data) {
  if (H5Lexists(grp, name.c_str(), H5P_DEFAULT) > 0) H5Ldelete(grp, name.c_str(), H5P_DEFAULT);
  hsize_t dims[1] = {static_cast<hsize_t>(n)};
  Closer space{check(H5Screate_simple(1, dims, nullptr), "H5Screate_simple"), H5Sclose};
  Closer dset{check(H5Dcreate2(grp, name.c_str(), type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    "create dataset " + name),
              H5Dclose};
  if (n > 0) check_status(H5Dwrite(dset.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write " + name);
}

size_t dataset_length(hid_t dset) {
  Closer space{check(H5Dget_space(dset), "H5Dget_space"), H5Sclose};
  hsize_t dims[1] = {0};
  if (H5Sget_simple_extent_ndims(space.id) != 1) fail("dataset is not 1-D");
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  return static_cast<size_t>(dims[0]);
}
}  // namespace

void File::write_column(const std::string& g, const std::string& name, const std::vector<double>& v) {
  Closer grp{group(g, true), H5Gclose};
  write_dataset(grp.id, name, H5T_NATIVE_DOUBLE, v.size(), v.data());
}

void File::write_column(const std::string& g, const std::string& name, const std::vector<int64_t>& v) {
  Closer grp{group(g, true), H5Gclose};
  write_dataset(grp.id, name, H5T_NATIVE_INT64, v.size(), v.data());
}

void File::write_column(const std::string& g, const std::string& name, const std::vector<std::string>& v) {
  Closer grp{group(g, true), H5Gclose};
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const auto& s : v) ptrs.push_back(s.c_str());
  Closer type{vlen_string_type(), H5Tclose};
  write_dataset(grp.id, name, type.id, ptrs.size(), ptrs.data());
}

namespace {
// Writes n values at rows [first, first + n) of the extendible dataset `name` of grp, creating or growing it.
void put_dataset_rows(hid_t grp, const std::string& name, hid_t type, size_t first, size_t n, const void* data,
                      size_t chunk_rows) {
  hid_t id;
  if (H5Lexists(grp, name.c_str(), H5P_DEFAULT) > 0) {
    id = H5Dopen2(grp, name.c_str(), H5P_DEFAULT);
  } else {
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED}, chunk[1] = {std::max<hsize_t>(chunk_rows, 1)};
    Closer space{check(H5Screate_simple(1, dims, maxdims), "H5Screate_simple"), H5Sclose};
    Closer dcpl{check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose};
    check_status(H5Pset_chunk(dcpl.id, 1, chunk), "H5Pset_chunk");
    id = H5Dcreate2(grp, name.c_str(), type, space.id, H5P_DEFAULT, dcpl.id, H5P_DEFAULT);
  }
  Closer dset{check(id, "extendible dataset " + name), H5Dclose};
  if (n == 0) return;
  hsize_t end[1] = {static_cast<hsize_t>(first + n)};
  if (dataset_length(dset.id) < first + n) check_status(H5Dset_extent(dset.id, end), "extend " + name);
  Closer file_space{check(H5Dget_space(dset.id), "H5Dget_space"), H5Sclose};
  hsize_t start[1] = {static_cast<hsize_t>(first)}, count[1] = {static_cast<hsize_t>(n)};
  check_status(H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start, nullptr, count, nullptr), "select rows");
  Closer mem_space{check(H5Screate_simple(1, count, nullptr), "H5Screate_simple"), H5Sclose};
  check_status(H5Dwrite(dset.id, type, mem_space.id, file_space.id, H5P_DEFAULT, data), "write rows of " + name);
}
}  // namespace

void File::put_rows(const std::string& g, const std::string& name, size_t first, const std::vector<double>& v,
                    size_t chunk_rows) {
  Closer grp{group(g, true), H5Gclose};
  put_dataset_rows(grp.id, name, H5T_NATIVE_DOUBLE, first, v.size(), v.data(), chunk_rows);
}

void File::put_rows(const std::string& g, const std::string& name, size_t first, const std::vector<int64_t>& v,
                    size_t chunk_rows) {
  Closer grp{group(g, true), H5Gclose};
  put_dataset_rows(grp.id, name, H5T_NATIVE_INT64, first, v.size(), v.data(), chunk_rows);
}

void File::put_rows(const std::string& g, const std::string& name, size_t first, const std::vector<std::string>& v,
                    size_t chunk_rows) {
  Closer grp{group(g, true), H5Gclose};
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const auto& s : v) ptrs.push_back(s.c_str());
  Closer type{vlen_string_type(), H5Tclose};
  put_dataset_rows(grp.id, name, type.id, first, ptrs.size(), ptrs.data(), chunk_rows);
}

size_t File::rows(const std::string& g, const std::string& name) const {
  if (!has(g + "/" + name)) return 0;
  Closer grp{group(g, false), H5Gclose};
  Closer dset{check(H5Dopen2(grp.id, name.c_str(), H5P_DEFAULT), "no dataset " + g + "/" + name), H5Dclose};
  return dataset_length(dset.id);
}

void File::flush(bool when_due) {
  if (!image_path_.empty() && when_due) {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    if (static_cast<double>(now - image_done_ns_) < image_spacing_ * static_cast<double>(image_cost_ns_)) return;
  }
  check_status(H5Fflush(id_, H5F_SCOPE_GLOBAL), "H5Fflush");
  if (!image_path_.empty()) write_image();
}

std::vector<double> File::read_doubles(const std::string& g, const std::string& name) const {
  Closer grp{group(g, false), H5Gclose};
  Closer dset{check(H5Dopen2(grp.id, name.c_str(), H5P_DEFAULT), "no dataset " + g + "/" + name), H5Dclose};
  std::vector<double> out(dataset_length(dset.id));
  if (!out.empty())
    check_status(H5Dread(dset.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read " + name);
  return out;
}

std::vector<int64_t> File::read_ints(const std::string& g, const std::string& name) const {
  Closer grp{group(g, false), H5Gclose};
  Closer dset{check(H5Dopen2(grp.id, name.c_str(), H5P_DEFAULT), "no dataset " + g + "/" + name), H5Dclose};
  std::vector<int64_t> out(dataset_length(dset.id));
  if (!out.empty())
    check_status(H5Dread(dset.id, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read " + name);
  return out;
}

std::vector<std::string> File::read_strings(const std::string& g, const std::string& name) const {
  Closer grp{group(g, false), H5Gclose};
  Closer dset{check(H5Dopen2(grp.id, name.c_str(), H5P_DEFAULT), "no dataset " + g + "/" + name), H5Dclose};
  size_t n = dataset_length(dset.id);
  std::vector<char*> ptrs(n, nullptr);
  Closer type{vlen_string_type(), H5Tclose};
  if (n > 0) check_status(H5Dread(dset.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "read " + name);
  std::vector<std::string> out;
  out.reserve(n);
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

bool File::has(const std::string& path) const {
  if (path.empty() || path == "/") return true;
  // H5Lexists needs every intermediate link to exist: walk the path.
  std::string prefix;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    std::string part = path.substr(pos, next - pos);
    pos = next + 1;
    if (part.empty()) continue;
    prefix += "/" + part;
    if (H5Lexists(id_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

std::vector<std::string> File::list(const std::string& g) const {
  Closer grp{group(g, false), H5Gclose};
  H5G_info_t info;
  check_status(H5Gget_info(grp.id, &info), "H5Gget_info");
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[256];
    ssize_t len = H5Lget_name_by_idx(grp.id, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name), H5P_DEFAULT);
    if (len > 0) out.emplace_back(name, std::min<size_t>(static_cast<size_t>(len), sizeof(name) - 1));
  }
  return out;
}

}  // namespace dfccl::h5
