import assert from "node:assert/strict";
import { test } from "node:test";

import { ManualClock } from "../src/clock.ts";
import { JobQueue } from "../src/queue.ts";
import { Scheduler } from "../src/scheduler.ts";

function setup() {
  const clock = new ManualClock(0);
  const queue = new JobQueue({ clock });
  queue.register("report", async () => {});
  return { clock, queue, scheduler: new Scheduler(queue) };
}

test("enqueues an entry each time it comes due", () => {
  const { clock, queue, scheduler } = setup();
  scheduler.every("report", 1_000);
  assert.equal(scheduler.tick(), 1);
  assert.equal(scheduler.tick(), 0);
  clock.advance(1_000);
  assert.equal(scheduler.tick(), 1);
  assert.equal(queue.stats().pending, 2);
});

test("missed runs are collapsed into one", () => {
  const { clock, scheduler } = setup();
  const entry = scheduler.every("report", 1_000, null, 500);
  clock.advance(3_700);
  assert.equal(scheduler.tick(), 1);
  assert.equal(entry.nextRunAt, 4_500);
});

test("cancel removes the entry", () => {
  const { scheduler } = setup();
  scheduler.every("report", 1_000);
  assert.equal(scheduler.cancel("report"), true);
  assert.equal(scheduler.cancel("report"), false);
  assert.equal(scheduler.tick(), 0);
});
