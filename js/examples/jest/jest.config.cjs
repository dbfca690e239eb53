module.exports = {
  globalSetup: "./global-setup.cjs",
  globalTeardown: "./global-teardown.cjs",
  testMatch: ["**/*.test.cjs"],
};
