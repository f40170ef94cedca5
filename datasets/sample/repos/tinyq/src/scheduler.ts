import type { JobQueue } from "./queue.ts";

export interface ScheduleEntry {
  name: string;
  payload: unknown;
  everyMs: number;
  nextRunAt: number;
}

/** Enqueues recurring jobs into a queue. Call `tick()` periodically. */
export class Scheduler {
  private readonly queue: JobQueue;
  private entries: ScheduleEntry[] = [];

  constructor(queue: JobQueue) {
    this.queue = queue;
  }

  /** Run job `name` every `everyMs`, first at `startAt` (default: now). */
  every(name: string, everyMs: number, payload: unknown = null, startAt?: number): ScheduleEntry {
    if (!(everyMs > 0)) throw new RangeError("everyMs must be positive");
    if (this.entries.some((e) => e.name === name)) {
      throw new Error(`"${name}" is already scheduled`);
    }
    const entry = { name, payload, everyMs, nextRunAt: startAt ?? this.queue.clock.now() };
    this.entries.push(entry);
    return entry;
  }

  cancel(name: string): boolean {
    const before = this.entries.length;
    this.entries = this.entries.filter((e) => e.name !== name);
    return this.entries.length < before;
  }

  /**
   * Enqueue every entry whose time has come. Missed runs are collapsed into
   * one, so a long pause does not produce a burst. Returns the number enqueued.
   */
  tick(): number {
    const now = this.queue.clock.now();
    let enqueued = 0;
    for (const entry of this.entries) {
      if (entry.nextRunAt > now) continue;
      this.queue.enqueue(entry.name, entry.payload, { runAt: entry.nextRunAt });
      const missed = Math.floor((now - entry.nextRunAt) / entry.everyMs);
      entry.nextRunAt += (missed + 1) * entry.everyMs;
      enqueued++;
    }
    return enqueued;
  }

  list(): readonly ScheduleEntry[] {
    return this.entries;
  }
}
