//===- StatusTest.cpp - Status and StatusOr -------------------------------===//

#include "runtime/Support/Status.h"

#include <gtest/gtest.h>

namespace zcc {
namespace {

Status failingLoad(const char *path) {
  return makeStatus(StatusCode::kNotFound, "no such file '%s'", path);
}

Status loadTwice(const char *path) {
  ZCC_RETURN_IF_ERROR(Status::ok(), "never added");
  ZCC_RETURN_IF_ERROR(failingLoad(path), "while loading plan %s", path);
  return Status::ok();
}

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.isOk());
  EXPECT_EQ(status.toString(), "ok");
}

TEST(Status, ContextReadsOutermostFirst) {
  Status status = loadTwice("a.bin");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  status.addContext("while starting rank 1");
  EXPECT_EQ(status.message(),
            "while starting rank 1: while loading plan a.bin: no such file 'a.bin'");
  EXPECT_EQ(status.toString().rfind("not found: ", 0), 0u);
}

TEST(Status, ContextOnOkIsIgnored) {
  Status status;
  status.addContext("while doing nothing");
  EXPECT_TRUE(status.isOk());
  EXPECT_EQ(status.message(), "");
}

StatusOr<int> parsePositive(int value) {
  if (value <= 0)
    return makeStatus(StatusCode::kInvalidArgument, "%d is not positive", value);
  return value;
}

TEST(StatusOr, HoldsValueOrStatus) {
  StatusOr<int> good = parsePositive(3);
  ASSERT_TRUE(good.isOk());
  EXPECT_EQ(*good, 3);
  StatusOr<int> bad = parsePositive(-2);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "-2 is not positive");
}

TEST(StatusOr, OkStatusWithoutValueIsAnError) {
  StatusOr<int> wrong{Status::ok()};
  EXPECT_FALSE(wrong.isOk());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInternal);
}

TEST(Status, FormatsLongMessages) {
  std::string longName(5000, 'x');
  Status status = makeStatus(StatusCode::kInternal, "%s!", longName.c_str());
  EXPECT_EQ(status.message().size(), 5001u);
  EXPECT_EQ(status.message().back(), '!');
}

} // namespace
} // namespace zcc
