import assert from "node:assert/strict";
import { test } from "node:test";
import { setImmediate as flush } from "node:timers/promises";

import { ManualClock } from "../src/clock.ts";
import { JobQueue } from "../src/queue.ts";
import { TokenBucket } from "../src/rateLimiter.ts";
import { Worker } from "../src/worker.ts";

test("worker drains the queue and stops", async () => {
  const clock = new ManualClock();
  const queue = new JobQueue({ clock });
  const done: string[] = [];
  queue.register<string>("say", async (job) => {
    done.push(job.payload);
  });
  queue.enqueue("say", "a");
  queue.enqueue("say", "b");
  const worker = new Worker(queue, { pollMs: 10 });
  worker.start();
  await flush();
  assert.deepEqual(done, ["a", "b"]);
  const stopped = worker.stop();
  clock.advance(10);
  await stopped;
  assert.equal(worker.isRunning, false);
});

test("worker respects the rate limiter", async () => {
  const clock = new ManualClock();
  const queue = new JobQueue({ clock });
  let runs = 0;
  queue.register("tick", async () => {
    runs++;
  });
  for (let i = 0; i < 3; i++) queue.enqueue("tick", i);
  const worker = new Worker(queue, { limiter: new TokenBucket(1, 1, clock) });
  worker.start();
  await flush();
  assert.equal(runs, 1);
  clock.advance(1_000);
  await flush();
  assert.equal(runs, 2);
  const stopped = worker.stop();
  clock.advance(1_000);
  await stopped;
});
