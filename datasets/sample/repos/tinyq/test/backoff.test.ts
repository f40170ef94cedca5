import assert from "node:assert/strict";
import { test } from "node:test";

import { backoffDelay } from "../src/backoff.ts";

const opts = { baseMs: 100, maxMs: 5_000 };

test("delay doubles per attempt", () => {
  assert.deepEqual([1, 2, 3, 4].map((a) => backoffDelay(a, opts)), [100, 200, 400, 800]);
});

test("delay is capped at maxMs", () => {
  assert.equal(backoffDelay(7, opts), 5_000);
  assert.equal(backoffDelay(20, opts), 5_000);
});

test("jitter spreads the delay around the nominal value", () => {
  const withJitter = { ...opts, jitter: 0.5 };
  assert.equal(backoffDelay(2, withJitter, () => 0), 100);
  assert.equal(backoffDelay(2, withJitter, () => 0.5), 200);
  assert.equal(backoffDelay(2, withJitter, () => 1), 300);
});

test("attempt must be a positive integer", () => {
  assert.throws(() => backoffDelay(0, opts), RangeError);
  assert.throws(() => backoffDelay(1.5, opts), RangeError);
});
