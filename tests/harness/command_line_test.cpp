// The command line (config/command_line.h): one option per settings row, nccl-tests' letters, the refusals, and
// the checks main runs before anything else (output paths, one host).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/command_line.h"
#include "config/settings.h"

using namespace dfccl::harness;

namespace {

ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dfccl-harness");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data(), "dfccl-harness 1.2.3 (git abc)");
}

}  // namespace

TEST(CommandLine, HelpListsEverySettingAndAlias) {
  const std::string help = command_line_help();
  for (const Setting& s : settings())
    EXPECT_NE(help.find(std::string("--") + s.key), std::string::npos) << s.key << " is missing from --help";
  for (const auto& [alias, key] : setting_aliases())
    EXPECT_NE(help.find((alias.size() == 1 ? "-" : "--") + alias), std::string::npos) << alias;
  for (const char* opt : {"--workload", "--out", "--overwrite", "-J", "--expect", "--progress", "-g", "-t", "-a", "-c",
                          "-G", "-m", "-z", "-C", "-R", "-N"})
    EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(CommandLine, SettingsBecomeOverridesInTableOrder) {
  ParseOutcome p = parse({"-n", "3", "--sizes.end=1M", "-b", "8", "--backend", "host,nccl", "--run.check", "--quiet",
                          "-J", "x.json", "--expect", "wrong==0", "--expect", "busbw_mean>1"});
  ASSERT_FALSE(p.exit_code) << p.err;
  const Overrides want = {{"run.backend", "host,nccl"},
                          {"run.iterations", "3"},
                          {"run.check", "true"},
                          {"sizes.begin", "8"},
                          {"sizes.end", "1M"}};
  EXPECT_EQ(p.options.overrides, want);
  EXPECT_TRUE(p.options.quiet);
  EXPECT_TRUE(p.options.workload_path.empty());
  EXPECT_EQ(p.options.json_path, "x.json");
  EXPECT_EQ(p.options.expectations, (std::vector<std::string>{"wrong==0", "busbw_mean>1"}));
  // Given twice: the last one wins, as in nccl-tests.
  p = parse({"-n", "3", "--iters", "4"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.options.overrides, (Overrides{{"run.iterations", "4"}}));
}

TEST(CommandLine, RefusalsNameTheOption) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c :
       {Case{{"-g", "2"}, "-g/--ngpus 2"}, Case{{"-t", "8"}, "-t/--nthreads 8"}, Case{{"-a", "1"}, "-a/--average 1"},
        Case{{"--bogus", "1"}, "--bogus"}, Case{{"stray"}, "stray"},
        Case{{"--progress", "-1"}, "--progress -1: the seconds between progress lines must be 0 or more"},
        Case{{"--run.bogus", "1"}, "unknown option --run.bogus (dfccl-harness --list-keys lists the workload keys"}}) {
    ParseOutcome p = parse(c.args);
    ASSERT_TRUE(p.exit_code) << c.message;
    EXPECT_EQ(*p.exit_code, 2) << c.message;
    EXPECT_NE(p.err.find(c.message), std::string::npos) << p.err;
  }
  for (auto args : {std::vector<std::string>{"-g", "1", "-t", "1", "-a", "3"}}) EXPECT_FALSE(parse(args).exit_code);
}

// nccl-tests' -G -m -z -C -R -N -c, -d all and -o all: their defaults accepted, -c 0/1 as run.check, -G N > 0 as
// run.graph_replays, every other value refused naming the option.
TEST(CommandLine, NcclTestsLettersAcceptedOrRefusedByName) {
  ParseOutcome p = parse({"-G",
                          "0",
                          "-m",
                          "1",
                          "-z",
                          "0",
                          "-C",
                          "0",
                          "-R",
                          "0",
                          "-N",
                          "1",
                          "--cudagraph",
                          "0",
                          "--agg_iters",
                          "1",
                          "--blocking",
                          "0",
                          "--report_cputime",
                          "0",
                          "--local_register",
                          "0",
                          "--run_cycles",
                          "1",
                          "-d",
                          "int32",
                          "-o",
                          "max"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.options.overrides, (Overrides{{"data.dtype", "int32"}, {"data.op", "max"}}));
  p = parse({"-c", "0"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.options.overrides, (Overrides{{"run.check", "false"}}));
  p = parse({"-c", "1", "-n", "2"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.options.overrides, (Overrides{{"run.iterations", "2"}, {"run.check", "true"}}));
  p = parse({"--check", "false"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.options.overrides, (Overrides{{"run.check", "false"}}));
  p = parse({"-G", "5", "--backend", "nccl-graph"});
  ASSERT_FALSE(p.exit_code) << p.err;
  EXPECT_EQ(p.options.overrides, (Overrides{{"run.backend", "nccl-graph"}, {"run.graph_replays", "5"}}));
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c :
       {Case{{"-G", "-1"}, "-G/--cudagraph -1: "}, Case{{"--cudagraph", "-4"}, "-G/--cudagraph -4: "},
        Case{{"-m", "4"}, "-m/--agg_iters 4: "}, Case{{"-z", "1"}, "-z/--blocking 1: "},
        Case{{"-C", "1"}, "-C/--report_cputime 1: "}, Case{{"-R", "1"}, "-R/--local_register 1: "},
        Case{{"-N", "0"}, "-N/--run_cycles 0: "}, Case{{"-c", "5"}, "-c 5: "}, Case{{"-c", "-1"}, "-c -1: "},
        Case{{"-d", "all"}, "-d/--datatype all: "}, Case{{"--datatype", "all"}, "-d/--datatype all: "},
        Case{{"-o", "all"}, "-o/--op all: "}, Case{{"-G", "x"}, "--cudagraph"}}) {
    p = parse(c.args);
    ASSERT_TRUE(p.exit_code) << c.message;
    EXPECT_EQ(*p.exit_code, 2) << c.message;
    EXPECT_NE(p.err.find(c.message), std::string::npos) << p.err;
  }
}

TEST(CommandLine, VersionAndHelpStopWithZero) {
  ParseOutcome p = parse({"--version"});
  ASSERT_TRUE(p.exit_code);
  EXPECT_EQ(*p.exit_code, 0);
  EXPECT_NE(p.out.find("dfccl-harness 1.2.3 (git abc)"), std::string::npos) << p.out;
  p = parse({"--help"});
  ASSERT_TRUE(p.exit_code);
  EXPECT_EQ(*p.exit_code, 0);
  EXPECT_NE(p.out.find("--sizes.begin"), std::string::npos);
}

TEST(CommandLine, OutputPathsAreCheckedBeforeTheRun) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("dfccl_cli_test_{}", getpid());
  fs::create_directories(dir);
  const std::string file = (dir / "r.h5").string();
  EXPECT_EQ(output_path_problem("--out", file, false), "");
  std::ofstream(file) << "x";
  EXPECT_NE(output_path_problem("--out", file, false).find("--out " + file + ": the file exists"), std::string::npos);
  EXPECT_EQ(output_path_problem("--out", file, true), "");
  EXPECT_NE(output_path_problem("-J", (dir / "no" / "r.json").string(), true).find("-J "), std::string::npos);
  EXPECT_NE(output_path_problem("--out", dir.string(), true).find("is a folder"), std::string::npos);
  fs::remove_all(dir);
}
