"use strict";
// Jest's node environment, which writes the trace of each scope a failed test made
// (`testEnvironment: "ptc-emulator/jest-environment"`; traces.cjs). Jest tells an environment of
// every test's events: a test starts (its scopes so far are forgotten), a test is done (with errors:
// it failed).

const path = require("node:path");

const { ON_SCOPE, testId, traceFailure } = require("./traces.cjs");

// The project's jest-environment-node (Jest's own), found from the project first.
const { TestEnvironment } = require(require.resolve("jest-environment-node", { paths: [process.cwd(), __dirname] }));

function namesOf(test) {
  const names = [];
  for (let block = test; block && block.parent; block = block.parent) names.unshift(block.name);
  return names; // the root describe block (no parent) is no name of the test's
}

class EmulatorEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.ptcTestPath = context.testPath ? path.resolve(context.testPath) : "";
    this.ptcScopes = [];
    this.global[ON_SCOPE] = (scope) => this.ptcScopes.push(scope);
  }

  async handleTestEvent(event, state) {
    if (super.handleTestEvent) await super.handleTestEvent(event, state);
    if (event.name === "test_start") {
      this.ptcScopes = [];
    } else if (event.name === "test_done") {
      const scopes = this.ptcScopes;
      this.ptcScopes = [];
      if (!event.test.errors.length) return;
      const id = testId(this.ptcTestPath, namesOf(event.test));
      const claims = {};
      for (const scope of scopes) await traceFailure(scope, id, claims);
    }
  }
}

module.exports = EmulatorEnvironment;
module.exports.TestEnvironment = EmulatorEnvironment;
