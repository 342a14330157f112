// A small RAII layer over the HDF5 C API, shared by the harness and the simulator.
//
// Convention for every DFCCL results file (docs/hdf5-layout.md): metadata as attributes (strings or numbers) on the
// root group or a subgroup; each table is a group whose columns are 1-D datasets of equal length (float64, int64 or
// variable-length UTF-8 strings). Groups are created on demand from '/'-separated paths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dfccl::h5 {

class File {
 public:
  static File create(const std::string& path);  // truncates an existing file
  // For a file written while a run goes on: the file is built in memory, and each flush() replaces `path` with the
  // whole image at once (written to `path`.partial, then renamed), so that the file on disk is always the complete
  // image of some flush, whenever the process is killed, and a reader never sees a flush half done. `spacing`: see
  // flush(when_due).
  static File create_checkpointed(const std::string& path, double spacing = 10);
  static File open_read(const std::string& path);
  File(File&& other) noexcept;
  File& operator=(File&&) = delete;
  File(const File&) = delete;
  ~File();

  // Attributes on a group ("" or "/" is the root group).
  void set_attr(const std::string& group, const std::string& name, const std::string& value);
  void set_attr(const std::string& group, const std::string& name, double value);
  void set_attr(const std::string& group, const std::string& name, int64_t value);
  std::string attr_string(const std::string& group, const std::string& name) const;
  double attr_double(const std::string& group, const std::string& name) const;
  int64_t attr_int(const std::string& group, const std::string& name) const;
  bool has_attr(const std::string& group, const std::string& name) const;

  // Columns: 1-D datasets under a group.
  void write_column(const std::string& group, const std::string& name, const std::vector<double>& values);
  void write_column(const std::string& group, const std::string& name, const std::vector<int64_t>& values);
  void write_column(const std::string& group, const std::string& name, const std::vector<std::string>& values);
  std::vector<double> read_doubles(const std::string& group, const std::string& name) const;
  std::vector<int64_t> read_ints(const std::string& group, const std::string& name) const;
  std::vector<std::string> read_strings(const std::string& group, const std::string& name) const;

  // Extendible columns (chunked, unlimited): writes values at rows [first, first + n), growing the dataset (created
  // on first use, chunk_rows rows per chunk) when it is shorter. rows() is a column's length (0 if it is missing).
  void put_rows(const std::string& group, const std::string& name, size_t first, const std::vector<double>& values,
                size_t chunk_rows = 256);
  void put_rows(const std::string& group, const std::string& name, size_t first, const std::vector<int64_t>& values,
                size_t chunk_rows = 256);
  void put_rows(const std::string& group, const std::string& name, size_t first, const std::vector<std::string>& values,
                size_t chunk_rows = 256);
  size_t rows(const std::string& group, const std::string& name) const;
  // Writes everything written so far to the file (H5Fflush; a checkpointed file's image replaces the file on disk):
  // after it returns the file on disk is complete and readable, even if the process is killed before the next write.
  // A checkpointed file with `when_due` writes its image only when the time since the last one is at least `spacing`
  // times what that one took (10: images cost at most about a tenth of the run; 0: always); else nothing yet.
  void flush(bool when_due = false);

  bool has(const std::string& path) const;                        // a group or dataset exists
  std::vector<std::string> list(const std::string& group) const;  // names of children

 private:
  explicit File(int64_t id, std::string image_path = {}, double spacing = 0)
      : id_(id), image_path_(std::move(image_path)), image_spacing_(spacing) {}
  int64_t group(const std::string& path, bool create) const;  // returns an open group id (caller closes)
  void write_image();                                         // a checkpointed file's flush
  int64_t id_ = -1;
  std::string image_path_;                         // checkpointed: where flush() puts the image; else empty
  double image_spacing_ = 0;                       // checkpointed: flush(when_due)'s ratio
  int64_t image_done_ns_ = 0, image_cost_ns_ = 0;  // when the last image was written, and what it took
};

}  // namespace dfccl::h5
