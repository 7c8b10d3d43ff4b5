// The behaviour every Store implementation must have. An implementation's test file defines a
// StoreFactory and instantiates the suite:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest, ::testing::Values(&MakeSqliteStore));
//
// A factory opens (or reopens) the store kept at `dir`, so "close and reopen" is tested too. A
// factory whose database cannot run here calls GTEST_SKIP and returns nullptr.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "store/store.h"

namespace weft {

using StoreFactory = std::unique_ptr<Store> (*)(const std::string& dir);

class StoreTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-store-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = GetParam()(dir_);
    if (IsSkipped()) return;  // the factory skipped: its database cannot run here
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    store_ = GetParam()(dir_);
    ASSERT_NE(store_, nullptr);
  }
  static JobRecord NewJob(const std::string& id, const std::string& tenant = "default",
                          TimeMs created = 1000) {
    JobRecord r;
    r.id = id;
    r.tenant = tenant;
    r.name = "name-" + id;
    r.state = JobState::kQueued;
    r.reason = "submitted";
    r.manifest = "name: x\n";
    r.spec_json = "{\"name\": \"x\"}";
    r.created_ms = created;
    r.updated_ms = created;
    return r;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace weft
