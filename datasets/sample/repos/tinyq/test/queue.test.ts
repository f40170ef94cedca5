import assert from "node:assert/strict";
import { test } from "node:test";

import { ManualClock } from "../src/clock.ts";
import { JobQueue } from "../src/queue.ts";

function setup() {
  const clock = new ManualClock(1_000);
  const queue = new JobQueue({ clock, backoff: { baseMs: 100, maxMs: 1_000 } });
  return { clock, queue };
}

test("runs due jobs in order", async () => {
  const { queue } = setup();
  const seen: number[] = [];
  queue.register<number>("n", async (job) => {
    seen.push(job.payload);
  });
  queue.enqueue("n", 1);
  queue.enqueue("n", 2);
  assert.equal(await queue.runDue(), 2);
  assert.deepEqual(seen, [1, 2]);
  assert.deepEqual(queue.stats(), { pending: 0, running: 0, succeeded: 2, failed: 0 });
});

test("jobs scheduled in the future wait for the clock", async () => {
  const { clock, queue } = setup();
  queue.register("x", async () => {});
  const job = queue.enqueue("x", null, { runAt: 1_500 });
  assert.equal(await queue.runDue(), 0);
  clock.advance(500);
  assert.equal(await queue.runDue(), 1);
  assert.equal(job.status, "succeeded");
});

test("failed jobs are retried after a backoff", async () => {
  const { clock, queue } = setup();
  let calls = 0;
  queue.register("flaky", async () => {
    calls++;
    if (calls === 1) throw new Error("boom");
  });
  const job = queue.enqueue("flaky", null);
  await queue.runDue();
  assert.equal(job.status, "pending");
  assert.equal(job.lastError, "boom");
  assert.equal(job.runAt, 1_100);
  clock.advance(100);
  await queue.runDue();
  assert.equal(job.status, "succeeded");
});

test("a job that keeps failing ends up failed", async () => {
  const { clock, queue } = setup();
  queue.register("broken", async () => {
    throw new Error("nope");
  });
  const job = queue.enqueue("broken", null);
  for (let i = 0; i < 10 && job.status !== "failed"; i++) {
    await queue.runDue();
    clock.advance(1_000);
  }
  assert.equal(job.status, "failed");
  assert.equal(job.lastError, "nope");
});

test("enqueue requires a registered handler", () => {
  const { queue } = setup();
  assert.throws(() => queue.enqueue("missing", null), /no handler registered/);
});
