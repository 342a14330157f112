// The HDF5 helper writes what it reads back: attributes, columns of each type, nested groups.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "h5_table.h"

namespace {

TEST(H5Table, RoundTrip) {
  auto path = (std::filesystem::temp_directory_path() / "dfccl_h5_table_test.h5").string();
  {
    auto f = dfccl::h5::File::create(path);
    f.set_attr("/", "tool", std::string("test"));
    f.set_attr("/", "pi", 3.25);
    f.set_attr("runs/a", "n", int64_t{42});
    f.write_column("runs/a", "x", std::vector<double>{1.5, 2.5});
    f.write_column("runs/a", "i", std::vector<int64_t>{-1, 7, 9});
    f.write_column("runs/a", "s", std::vector<std::string>{"alpha", "", "gamma"});
    f.write_column("runs/a", "empty", std::vector<double>{});
  }
  auto f = dfccl::h5::File::open_read(path);
  EXPECT_EQ(f.attr_string("/", "tool"), "test");
  EXPECT_EQ(f.attr_double("/", "pi"), 3.25);
  EXPECT_EQ(f.attr_int("runs/a", "n"), 42);
  EXPECT_TRUE(f.has_attr("runs/a", "n"));
  EXPECT_FALSE(f.has_attr("runs/a", "missing"));
  EXPECT_EQ(f.read_doubles("runs/a", "x"), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(f.read_ints("runs/a", "i"), (std::vector<int64_t>{-1, 7, 9}));
  EXPECT_EQ(f.read_strings("runs/a", "s"), (std::vector<std::string>{"alpha", "", "gamma"}));
  EXPECT_TRUE(f.read_doubles("runs/a", "empty").empty());
  EXPECT_TRUE(f.has("runs/a/x"));
  EXPECT_FALSE(f.has("runs/b"));
  EXPECT_EQ(f.list("runs"), (std::vector<std::string>{"a"}));
  EXPECT_THROW(f.read_doubles("runs/a", "nope"), std::runtime_error);
  std::remove(path.c_str());
}

}  // namespace

namespace {

// A checkpointed file keeps its spacing when moved (as the harness's writer moves it into place): with a spacing no
// run reaches, a flush when due writes no image, and a plain flush writes one. The file on disk is read from a copy
// (HDF5 does not open a file twice in one process).
TEST(H5Table, CheckpointedFileMovedKeepsItsSpacing) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / "dfccl_h5_checkpointed_test.h5").string();
  const std::string copy = (dir / "dfccl_h5_checkpointed_copy.h5").string();
  std::optional<dfccl::h5::File> f;
  f.emplace(dfccl::h5::File::create_checkpointed(path, 1e12));
  f->write_column("t", "x", std::vector<int64_t>{1, 2, 3});
  auto on_disk = [&] {
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    return dfccl::h5::File::open_read(copy).has("t/x");
  };
  f->flush(true);
  EXPECT_FALSE(on_disk()) << "a flush when due wrote an image long before it was due";
  f->flush();
  EXPECT_TRUE(on_disk());
  f.reset();
  std::filesystem::remove(path);
  std::filesystem::remove(copy);
}

}  // namespace
