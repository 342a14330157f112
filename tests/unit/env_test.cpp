// The environment table (lib/src/settings/env.cpp): every variable parses its default; integers are decimal and within
// the table's range, words one of the table's choices, and anything else is an error that names the variable; an
// unknown DFCCL_* name is matched to the closest known one.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "settings/env.h"
#include "settings/env_warn.h"
#include "util/error.h"

namespace {

// Sets a variable for one test and restores the environment afterwards.
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
};

// The message of the error env_int(name) throws, or "" if it returns.
std::string int_error(const char* name) {
  try {
    dfccl::env_int(name);
  } catch (const dfccl::Error& e) {
    EXPECT_EQ(e.code(), dfcclInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(Environment, EveryDefaultIsAccepted) {
  for (const auto& v : dfccl::env_table())
    for (const dfccl::Exec exec : {dfccl::Exec::Cuda, dfccl::Exec::Host}) {
      if (v.choices) EXPECT_EQ(dfccl::env_str(v.name, exec), dfccl::env_default(v, exec)) << v.name;
      else EXPECT_EQ(std::to_string(dfccl::env_int(v.name, exec)), dfccl::env_default(v, exec)) << v.name;
    }
}

// One variable, a default per executor; a value set applies to both. The deprecated DFCCL_HOST_* name is read for
// the host executor only, and only while the new name is unset; a bad value of it is refused naming it; it is warned
// about once, naming the new name.
TEST(Environment, PerExecutorDefaultsAndDeprecatedNames) {
  using dfccl::Exec;
  EXPECT_EQ(dfccl::env_int("DFCCL_SLOTS", Exec::Cuda), 3);
  EXPECT_EQ(dfccl::env_int("DFCCL_SLOTS", Exec::Host), 8);
  EXPECT_EQ(dfccl::env_int("DFCCL_BLOCKS", Exec::Cuda), 128);
  EXPECT_EQ(dfccl::env_int("DFCCL_BLOCKS", Exec::Host), 1);
  EXPECT_EQ(dfccl::env_int("DFCCL_LANES", Exec::Cuda), dfccl::env_int("DFCCL_LANES", Exec::Host));
  {
    ScopedEnv set("DFCCL_SLOTS", "5");
    EXPECT_EQ(dfccl::env_int("DFCCL_SLOTS", Exec::Cuda), 5);
    EXPECT_EQ(dfccl::env_int("DFCCL_SLOTS", Exec::Host), 5);
  }
  {
    ScopedEnv old("DFCCL_HOST_IDLE_NS", "7000");
    EXPECT_EQ(dfccl::env_int("DFCCL_IDLE_NS", Exec::Host), 7000);
    EXPECT_TRUE(dfccl::env_is_set("DFCCL_IDLE_NS", Exec::Host));
    EXPECT_STREQ(dfccl::env_source("DFCCL_IDLE_NS", Exec::Host), "DFCCL_HOST_IDLE_NS");
    EXPECT_EQ(dfccl::env_int("DFCCL_IDLE_NS", Exec::Cuda), 500000);  // the CUDA executor never read it
    EXPECT_FALSE(dfccl::env_is_set("DFCCL_IDLE_NS", Exec::Cuda));
    ScopedEnv set("DFCCL_IDLE_NS", "9000");
    EXPECT_EQ(dfccl::env_int("DFCCL_IDLE_NS", Exec::Host), 9000);
  }
  {
    ScopedEnv old("DFCCL_HOST_IDLE_NS", "abc");
    try {
      dfccl::env_int("DFCCL_IDLE_NS", Exec::Host);
      ADD_FAILURE() << "DFCCL_HOST_IDLE_NS=abc was accepted";
    } catch (const dfccl::Error& e) {
      EXPECT_NE(std::string(e.what()).find("DFCCL_HOST_IDLE_NS='abc'"), std::string::npos) << e.what();
    }
  }
  ScopedEnv old("DFCCL_HOST_SLOTS", "4");
  testing::internal::CaptureStderr();
  dfccl::env_warn_deprecated();
  dfccl::env_warn_deprecated();
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string warning = "DFCCL_HOST_SLOTS is deprecated: use DFCCL_SLOTS";
  const size_t first = err.find(warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("DFCCL_HOST_SLOTS is deprecated", first + 1), std::string::npos) << "warned twice: " << err;
  // A known name: not reported as a misspelling.
  const std::vector<std::string> unknown = dfccl::env_unknown_names();
  EXPECT_EQ(std::find(unknown.begin(), unknown.end(), "DFCCL_HOST_SLOTS"), unknown.end());
}

TEST(Environment, IntegersAreDecimalAndInRange) {
  {
    ScopedEnv e("DFCCL_IDLE_NS", "010");
    EXPECT_EQ(dfccl::env_int("DFCCL_IDLE_NS"), 10);  // not octal
  }
  for (const char* bad : {"-1", "0x10", "1e6", "12abc", " 5", "+5", "99999999999999999999", "3600000000001"}) {
    ScopedEnv e("DFCCL_IDLE_NS", bad);
    const std::string msg = int_error("DFCCL_IDLE_NS");
    EXPECT_NE(msg.find("DFCCL_IDLE_NS"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("0..3600000000000"), std::string::npos) << bad << ": " << msg;
  }
  ScopedEnv e("DFCCL_INIT_TIMEOUT_MS", "0");  // a timeout of 0 ms would fail every init at once
  EXPECT_NE(int_error("DFCCL_INIT_TIMEOUT_MS").find("DFCCL_INIT_TIMEOUT_MS"), std::string::npos);
}

TEST(Environment, WordsAreOneOfTheChoices) {
  ScopedEnv e("DFCCL_MODE", "blockin");
  try {
    dfccl::env_str("DFCCL_MODE");
    FAIL() << "DFCCL_MODE=blockin was accepted";
  } catch (const dfccl::Error& err) {
    EXPECT_NE(std::string(err.what()).find("preemptive|blocking"), std::string::npos) << err.what();
  }
}

TEST(Environment, UnknownNamesAreMatchedToTheClosest) {
  EXPECT_EQ(dfccl::env_closest("DFCCL_IDEL_NS"), "DFCCL_IDLE_NS");
  EXPECT_EQ(dfccl::env_closest("DFCCL_BLOCK"), "DFCCL_BLOCKS");
  ScopedEnv e("DFCCL_SLOT_BYTE", "4096");
  testing::internal::CaptureStderr();
  dfccl::env_warn_unknown();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("DFCCL_SLOT_BYTE is not a DFCCL setting (did you mean DFCCL_SLOT_BYTES?)"), std::string::npos)
      << err;
}

// The variables of the project's tools and Python package are known: no warning.
TEST(Environment, ToolVariablesAreNotWarnedAbout) {
  // DFCCL_STYLE_BASE: scripts/ci_style.sh's, which may be set for the whole of .ci/run.
  ScopedEnv a("DFCCL_TORCH_CUDA", "0"), b("DFCCL_REQUIRE_GPUS", "1"), c("DFCCL_STYLE_BASE", "85c945e");
  testing::internal::CaptureStderr();
  dfccl::env_warn_unknown();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("not a DFCCL setting"), std::string::npos) << err;
}

}  // namespace
