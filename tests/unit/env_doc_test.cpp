// docs/environment.md lists every DFCCL_* variable of the table in lib/src/env.cpp, with its default.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "env.h"

TEST(EnvironmentDoc, ListsEveryVariableWithItsDefault) {
  std::ifstream in(DFCCL_ENV_DOC);
  ASSERT_TRUE(in) << "cannot read " << DFCCL_ENV_DOC;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(dfccl::env_table().empty());
  for (const auto& v : dfccl::env_table()) {
    const std::string row = std::string("| `") + v.name + "` | `" + v.default_value + "` |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/environment.md lacks the row " << row;
  }
}
