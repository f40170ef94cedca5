import { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from "./backoff.ts";
import { systemClock, type Clock } from "./clock.ts";

export type JobStatus = "pending" | "running" | "succeeded" | "failed";

export interface Job<T = unknown> {
  id: number;
  name: string;
  payload: T;
  status: JobStatus;
  attempts: number;
  maxAttempts: number;
  /** Earliest time (ms) the job may run. */
  runAt: number;
  lastError?: string;
}

export type Handler<T = unknown> = (job: Job<T>) => Promise<void>;

export interface QueueOptions {
  /** Total attempts per job, including the first one. Default 3. */
  maxAttempts?: number;
  backoff?: BackoffOptions;
  clock?: Clock;
}

export interface EnqueueOptions {
  runAt?: number;
}

export class JobQueue {
  private readonly handlers = new Map<string, Handler<any>>();
  private readonly jobs: Job[] = [];
  private nextId = 1;
  private readonly maxAttempts: number;
  private readonly backoff: BackoffOptions;
  readonly clock: Clock;

  constructor(opts: QueueOptions = {}) {
    this.maxAttempts = opts.maxAttempts ?? 3;
    this.backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.clock = opts.clock ?? systemClock;
    if (!(this.maxAttempts >= 1)) throw new RangeError("maxAttempts must be >= 1");
  }

  register<T>(name: string, handler: Handler<T>): void {
    this.handlers.set(name, handler);
  }

  enqueue<T>(name: string, payload: T, opts: EnqueueOptions = {}): Job<T> {
    if (!this.handlers.has(name)) throw new Error(`no handler registered for "${name}"`);
    const job: Job<T> = {
      id: this.nextId++,
      name,
      payload,
      status: "pending",
      attempts: 0,
      maxAttempts: this.maxAttempts,
      runAt: opts.runAt ?? this.clock.now(),
    };
    this.jobs.push(job);
    return job;
  }

  /** Pending jobs whose runAt has passed, earliest first. */
  due(): Job[] {
    const now = this.clock.now();
    return this.jobs
      .filter((job) => job.status === "pending" && job.runAt <= now)
      .sort((a, b) => a.runAt - b.runAt || a.id - b.id);
  }

  /** The earliest due job, if any, without running it. */
  peek(): Job | undefined {
    return this.due()[0];
  }

  /** Run the earliest due job. Resolves to false if nothing was due. */
  async runNext(): Promise<boolean> {
    const job = this.peek();
    if (!job) return false;
    await this.runJob(job);
    return true;
  }

  /** Run due jobs until none are left; returns how many attempts were made. */
  async runDue(): Promise<number> {
    let count = 0;
    while (await this.runNext()) count++;
    return count;
  }

  /** Run one attempt of `job`; failures are recorded and retried, never thrown. */
  async runJob(job: Job): Promise<void> {
    const handler = this.handlers.get(job.name)!;
    job.status = "running";
    job.attempts += 1;
    try {
      await handler(job);
      job.status = "succeeded";
    } catch (err) {
      job.lastError = err instanceof Error ? err.message : String(err);
      if (job.attempts < job.maxAttempts) {
        job.status = "pending";
        job.runAt = this.clock.now() + backoffDelay(job.attempts, this.backoff);
      } else {
        job.status = "failed";
      }
    }
  }

  stats(): Record<JobStatus, number> {
    const counts: Record<JobStatus, number> = { pending: 0, running: 0, succeeded: 0, failed: 0 };
    for (const job of this.jobs) counts[job.status]++;
    return counts;
  }
}
