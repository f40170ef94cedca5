import assert from "node:assert/strict";
import { test } from "node:test";

import { ManualClock } from "../src/clock.ts";
import { TokenBucket } from "../src/rateLimiter.ts";

test("bucket starts full and empties", () => {
  const bucket = new TokenBucket(3, 1, new ManualClock());
  assert.equal(bucket.tryAcquire(), true);
  assert.equal(bucket.tryAcquire(2), true);
  assert.equal(bucket.tryAcquire(), false);
});

test("bucket refills over time up to capacity", () => {
  const clock = new ManualClock();
  const bucket = new TokenBucket(2, 4, clock);
  bucket.tryAcquire(2);
  clock.advance(250);
  assert.equal(bucket.available(), 1);
  clock.advance(10_000);
  assert.equal(bucket.available(), 2);
});

test("msUntilAvailable reports the wait in milliseconds", () => {
  const clock = new ManualClock();
  const bucket = new TokenBucket(1, 2, clock);
  assert.equal(bucket.msUntilAvailable(), 0);
  bucket.tryAcquire();
  assert.equal(bucket.msUntilAvailable(), 500);
  clock.advance(200);
  assert.equal(bucket.msUntilAvailable(), 300);
});

test("constructor validates its arguments", () => {
  assert.throws(() => new TokenBucket(0, 1), RangeError);
  assert.throws(() => new TokenBucket(1, 0), RangeError);
});
